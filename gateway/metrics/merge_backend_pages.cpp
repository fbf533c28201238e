#include "gateway/metrics/merge_backend_pages.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>

namespace dpgate::metrics {

namespace {

enum class Type : unsigned char { untyped, counter, gauge, histogram, summary };

constexpr std::array<std::string_view, 5> kTypeNames{"untyped", "counter", "gauge", "histogram", "summary"};

std::optional<Type> typeNamed(std::string_view word) {
    for (size_t i = 0; i < kTypeNames.size(); ++i)
        if (kTypeNames[i] == word) return Type(i);
    return std::nullopt;
}

bool isBlank(char c) { return c == ' ' || c == '\t'; }
bool isLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

// Strict UTF-8 as Go's utf8.ValidString reads it (no overlong forms, no
// surrogates, nothing above U+10FFFF): Prometheus refuses a label value
// that is not.
bool validUtf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            ++i;
            continue;
        }
        size_t n = 0;
        unsigned char lo = 0x80, hi = 0xBF;  // the range of the byte after the lead
        if (b >= 0xC2 && b <= 0xDF) n = 1;
        else if (b == 0xE0) n = 2, lo = 0xA0;
        else if (b == 0xED) n = 2, hi = 0x9F;
        else if (b >= 0xE1 && b <= 0xEF) n = 2;
        else if (b == 0xF0) n = 3, lo = 0x90;
        else if (b == 0xF4) n = 3, hi = 0x8F;
        else if (b >= 0xF1 && b <= 0xF3) n = 3;
        else return false;
        if (s.size() - i <= n) return false;
        for (size_t k = 1; k <= n; ++k) {
            const auto c = static_cast<unsigned char>(s[i + k]);
            if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return false;
        }
        i += n + 1;
    }
    return true;
}

// A value as Go's strconv.ParseFloat takes it and from_chars agrees:
// decimals, exponents, Inf and NaN (unsigned). Anything either would read
// differently (hex, "nan(...)", out of range) is refused.
bool isFloat(std::string_view t) {
    if (t.empty() || t.find('(') != std::string_view::npos) return false;
    std::string_view body = t;
    if (body.front() == '+' || body.front() == '-') body.remove_prefix(1);
    if (body.empty() || body.front() == '+' || body.front() == '-') return false;
    if (body.size() != t.size() && (body.front() == 'n' || body.front() == 'N')) return false;
    double value = 0;
    const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value, std::chars_format::general);
    return ec == std::errc() && end == body.data() + body.size();
}

// Milliseconds since the epoch, an int64 (Go's strconv.ParseInt).
bool isTimestamp(std::string_view t) {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    return !t.empty() && ec == std::errc() && end == t.data() + t.size();
}

// Only \\ and \n in a HELP text; \\, \" and \n in a label value.
bool validEscapes(std::string_view s, bool quote_allowed) {
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\') continue;
        if (i + 1 == s.size()) return false;
        const char next = s[++i];
        if (next != '\\' && next != 'n' && !(quote_allowed && next == '"')) return false;
    }
    return true;
}

struct Label {
    std::string_view name;
    std::string_view value;  // as written, escapes kept
};

// One line, left to right; every step advances or fails, so a line costs
// time linear in its length.
class Cursor {
public:
    explicit Cursor(std::string_view line) : s_(line) {}

    bool atEnd() const { return i_ == s_.size(); }
    char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
    bool consume(char c) {
        if (peek() != c || atEnd()) return false;
        ++i_;
        return true;
    }
    void skipBlanks() {
        while (i_ < s_.size() && isBlank(s_[i_])) ++i_;
    }
    std::string_view rest() const { return s_.substr(i_); }

    // Metric names may hold ':'; label names may not.
    bool name(std::string_view& out, bool metric) {
        const size_t start = i_;
        if (atEnd() || !(isLetter(s_[i_]) || (metric && s_[i_] == ':'))) return false;
        ++i_;
        while (i_ < s_.size() && (isLetter(s_[i_]) || isDigit(s_[i_]) || (metric && s_[i_] == ':'))) ++i_;
        out = s_.substr(start, i_ - start);
        return true;
    }

    // Up to the next blank or the end.
    std::string_view token() {
        const size_t start = i_;
        while (i_ < s_.size() && !isBlank(s_[i_])) ++i_;
        return s_.substr(start, i_ - start);
    }

    // After an opening quote: the value up to the closing one, which is consumed.
    bool quoted(std::string_view& out) {
        const size_t start = i_;
        while (i_ < s_.size() && s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
        if (i_ >= s_.size()) return false;
        out = s_.substr(start, i_ - start);
        ++i_;
        return validEscapes(out, true) && validUtf8(out);
    }

private:
    std::string_view s_;
    size_t i_ = 0;
};

struct Sample {
    std::string_view name;
    std::vector<Label> labels;  // reused from line to line
    std::string_view value;
    std::string_view timestamp;  // empty: none
};

bool readLabels(Cursor& c, size_t max_labels, std::vector<Label>& labels) {
    c.consume('{');
    c.skipBlanks();
    while (!c.consume('}')) {
        Label label;
        if (labels.size() == max_labels || !c.name(label.name, false)) return false;
        c.skipBlanks();
        if (!c.consume('=')) return false;
        c.skipBlanks();
        if (!c.consume('"') || !c.quoted(label.value)) return false;
        labels.push_back(label);
        c.skipBlanks();
        // A comma after the last label is allowed, as Prometheus allows it.
        if (c.consume(',')) c.skipBlanks();
        else if (c.peek() != '}') return false;
    }
    return true;
}

bool readSample(std::string_view line, size_t max_labels, Sample& out) {
    Cursor c(line);
    out.labels.clear();
    if (!c.name(out.name, true)) return false;
    if (c.peek() != '{' && !isBlank(c.peek())) return false;
    c.skipBlanks();
    if (c.peek() == '{') {
        if (!readLabels(c, max_labels, out.labels)) return false;
        c.skipBlanks();
    }
    out.value = c.token();
    if (!isFloat(out.value)) return false;
    c.skipBlanks();
    out.timestamp = c.token();
    if (!out.timestamp.empty() && !isTimestamp(out.timestamp)) return false;
    c.skipBlanks();
    return c.atEnd();
}

// The labels a sample is written with, after backend="...": its own
// `backend` renamed, none reserved, none twice.
bool checkLabels(std::vector<Label>& labels) {
    for (size_t i = 0; i < labels.size(); ++i) {
        if (labels[i].name == "backend") labels[i].name = "exported_backend";
        if (labels[i].name == "__name__") return false;
        for (size_t j = 0; j < i; ++j)
            if (labels[j].name == labels[i].name) return false;
    }
    return true;
}

std::optional<std::string_view> labelValue(const std::vector<Label>& labels, std::string_view name) {
    for (const Label& label : labels)
        if (label.name == name) return label.value;
    return std::nullopt;
}

struct Family {
    std::string name;
    std::string help;  // as written, escapes kept
    bool has_help = false;
    Type type = Type::untyped;
    bool type_decided = false;   // by the first TYPE line, or by the first sample (untyped)
    bool type_declared = false;  // by a TYPE line: written out
    bool dropped = false;        // shadowed by a histogram or a summary: not written
    std::string samples;
    std::vector<std::pair<size_t, size_t>> page_samples;  // (page, samples), pages ascending
};

struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

constexpr std::string_view kReservedPrefix = "dpgate_";
constexpr std::array<std::string_view, 3> kSuffixes{"_bucket", "_sum", "_count"};

class Merger {
public:
    explicit Merger(const MergeLimits& limits) : limits_(limits) {}

    MergedPages::PageCount addPage(size_t page, std::string_view backend, std::string_view text) {
        page_ = page;
        backend_ = backend;
        declared_.clear();
        count_ = {};
        while (!text.empty()) {
            const size_t eol = text.find('\n');
            std::string_view line = text.substr(0, eol);
            text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
            if (line.ends_with('\r')) line.remove_suffix(1);
            size_t first = 0;
            while (first < line.size() && isBlank(line[first])) ++first;
            line.remove_prefix(first);
            if (line.empty()) continue;
            if (line.size() > limits_.max_line_bytes) ++count_.skipped;
            else if (line.front() == '#') comment(line);
            else sample(line);
        }
        return count_;
    }

    // A family named as a histogram's _bucket, _sum or _count, or a
    // summary's _sum or _count (it came before that family was typed so, or
    // a page typed it on its own): Prometheus's parser would read its lines
    // as that family's and refuse the page. It is dropped, its samples
    // counted as skipped.
    void dropShadowed(std::vector<MergedPages::PageCount>& pages) {
        for (Family& f : families_) {
            if (!shadowed(f.name)) continue;
            f.dropped = true;
            for (const auto& [page, samples] : f.page_samples) {
                pages[page].samples -= samples;
                pages[page].skipped += samples;
            }
        }
    }

    void write(std::string& out) const {
        for (const Family& f : families_) {
            if (f.dropped) continue;
            if (f.has_help) {
                out += "# HELP ";
                out += f.name;
                out += ' ';
                out += f.help;
                out += '\n';
            }
            if (f.type_declared) {
                out += "# TYPE ";
                out += f.name;
                out += ' ';
                out += kTypeNames[size_t(f.type)];
                out += '\n';
            }
            out += f.samples;
        }
    }

private:
    Family* family(std::string_view name) {
        if (name.starts_with(kReservedPrefix)) return nullptr;
        if (const auto it = by_name_.find(name); it != by_name_.end()) return &families_[it->second];
        if (families_.size() == limits_.max_families) return nullptr;
        by_name_.emplace(std::string(name), families_.size());
        Family& added = families_.emplace_back();
        added.name = name;
        return &added;
    }

    bool shadowed(std::string_view name) const {
        for (const std::string_view suffix : kSuffixes) {
            if (!name.ends_with(suffix) || name.size() == suffix.size()) continue;
            const Family* base = known(name.substr(0, name.size() - suffix.size()));
            if (base == nullptr || !base->type_decided) continue;
            if (base->type == Type::histogram || (base->type == Type::summary && suffix != "_bucket")) return true;
        }
        return false;
    }

    const Family* known(std::string_view name) const {
        const auto it = by_name_.find(name);
        return it == by_name_.end() ? nullptr : &families_[it->second];
    }

    // # HELP name text, # TYPE name type; any other comment is dropped.
    void comment(std::string_view line) {
        Cursor c(line);
        c.consume('#');
        c.skipBlanks();
        const std::string_view word = c.token();
        if ((word != "HELP" && word != "TYPE") || c.atEnd()) return;
        c.skipBlanks();
        std::string_view name;
        if (!c.name(name, true) || !(c.atEnd() || isBlank(c.peek()))) return skip();
        c.skipBlanks();
        if (word == "HELP") {
            const std::string_view help = c.rest();
            if (!validEscapes(help, false) || !validUtf8(help)) return skip();
            Family* f = family(name);
            if (f == nullptr) return skip();
            if (f->has_help || help.empty()) return;  // the first page's words stand
            f->help = help;
            f->has_help = true;
            return;
        }
        const std::optional<Type> type = typeNamed(c.token());
        c.skipBlanks();
        if (!type || !c.atEnd()) return skip();
        // A second TYPE for one name in a page: the first stands.
        if (!declared_.emplace(name, *type).second) return skip();
        Family* f = family(name);
        if (f == nullptr) return skip();
        if (!f->type_decided) {
            f->type = *type;
            f->type_decided = true;
            f->type_declared = true;
        } else if (f->type != *type) {
            return skip();
        } else {
            f->type_declared = true;
        }
    }

    struct Resolved {
        std::string_view family;
        std::optional<Type> declared;  // this page's TYPE for it
    };

    // Which family a sample belongs to: a histogram's _bucket, _sum and
    // _count, and a summary's _sum and _count, belong to the base name's,
    // when this page (or, failing that, an earlier one) typed it so.
    Resolved resolve(std::string_view name) const {
        if (const auto it = declared_.find(name); it != declared_.end()) return {name, it->second};
        for (const std::string_view suffix : kSuffixes) {
            if (!name.ends_with(suffix) || name.size() == suffix.size()) continue;
            const std::string_view base = name.substr(0, name.size() - suffix.size());
            std::optional<Type> type;
            if (const auto it = declared_.find(base); it != declared_.end()) type = it->second;
            else if (const Family* f = known(base); f && f->type_decided) type = f->type;
            if (type == Type::histogram || (type == Type::summary && suffix != "_bucket")) {
                const bool page_declared = declared_.contains(base);
                return {base, page_declared ? type : std::nullopt};
            }
        }
        return {name, std::nullopt};
    }

    void sample(std::string_view line) {
        if (count_.samples == limits_.max_samples_per_page) return skip();
        if (!readSample(line, limits_.max_labels, sample_) || !checkLabels(sample_.labels)) return skip();
        const Resolved resolved = resolve(sample_.name);
        Family* f = family(resolved.family);
        if (f == nullptr) return skip();
        if (!f->type_decided) {
            f->type = resolved.declared.value_or(Type::untyped);
            f->type_decided = true;
        } else if (resolved.declared && *resolved.declared != f->type) {
            return skip();
        }
        if (!fitsType(*f)) return skip();
        append(f->samples);
        if (f->page_samples.empty() || f->page_samples.back().first != page_) f->page_samples.emplace_back(page_, 0);
        ++f->page_samples.back().second;
        ++count_.samples;
    }

    // What Prometheus's parser demands of a histogram's or a summary's samples.
    bool fitsType(const Family& f) const {
        const std::string_view name = sample_.name;
        const bool bare = name.size() == f.name.size();
        if (f.type == Type::histogram) {
            if (bare) return false;
            if (name.ends_with("_bucket")) {
                const std::optional<std::string_view> le = labelValue(sample_.labels, "le");
                return le && isFloat(*le);
            }
        } else if (f.type == Type::summary) {
            if (bare) {
                const std::optional<std::string_view> quantile = labelValue(sample_.labels, "quantile");
                return quantile && isFloat(*quantile);
            }
        } else if (!bare) {
            return false;  // a _sum or _count under a family that is not a histogram or a summary
        }
        return true;
    }

    void append(std::string& out) const {
        out += sample_.name;
        out += "{backend=\"";
        out += backend_;
        out += '"';
        for (const Label& label : sample_.labels) {
            out += ',';
            out += label.name;
            out += "=\"";
            out += label.value;
            out += '"';
        }
        out += "} ";
        out += sample_.value;
        if (!sample_.timestamp.empty()) {
            out += ' ';
            out += sample_.timestamp;
        }
        out += '\n';
    }

    void skip() { ++count_.skipped; }

    const MergeLimits& limits_;
    std::vector<Family> families_;
    std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> by_name_;
    // This page's TYPE lines (views into its text).
    std::unordered_map<std::string_view, Type> declared_;
    size_t page_ = 0;
    std::string_view backend_;
    MergedPages::PageCount count_;
    Sample sample_;
};

void writeUpGauge(std::span<const BackendPage> pages, std::string& out) {
    if (pages.empty()) return;
    out +=
        "# HELP dpgate_backend_metrics_up Whether this answer holds the backend's own /metrics series (1) or "
        "they could not be fetched (0).\n"
        "# TYPE dpgate_backend_metrics_up gauge\n";
    for (const BackendPage& page : pages) {
        out += "dpgate_backend_metrics_up{backend=\"";
        out += page.backend;
        out += page.text ? "\"} 1\n" : "\"} 0\n";
    }
}

}  // namespace

MergedPages mergeBackendPages(std::span<const BackendPage> pages, const MergeLimits& limits) {
    MergedPages merged;
    Merger merger(limits);
    merged.pages.reserve(pages.size());
    size_t input_bytes = 0;
    for (size_t i = 0; i < pages.size(); ++i) {
        const BackendPage& page = pages[i];
        merged.pages.push_back(page.text ? merger.addPage(i, page.backend, *page.text) : MergedPages::PageCount{});
        input_bytes += page.text ? page.text->size() : 0;
    }
    merger.dropShadowed(merged.pages);
    merged.text.reserve(input_bytes + input_bytes / 4);
    merger.write(merged.text);
    writeUpGauge(pages, merged.text);
    return merged;
}

}  // namespace dpgate::metrics
