#include "admission/template/jinja/py_json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <system_error>
#include <vector>

#include "admission/template/jinja/py_float.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace dpgate::admission::jinja {

namespace {

constexpr std::string_view kIntDigitsLimitToText =
    "Exceeds the limit (4300 digits) for integer string conversion; use sys.set_int_max_str_digits() to increase "
    "the limit";

bool isDigit(char c) { return c >= '0' && c <= '9'; }

std::size_t intDigitCount(std::string_view digits) { return digits.size() - (digits.front() == '-' ? 1 : 0); }

// ---------------------------------------------------------------- numbers

// `token` matches -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? with a
// fraction or an exponent. Python's float() rounds correctly and takes what
// is out of range to inf or 0.0; std::from_chars rounds the same way but
// reports out-of-range without a value.
double jsonFloat(std::string_view token) {
    double value = 0;
    const char* const end = token.data() + token.size();
    if (std::from_chars(token.data(), end, value).ec == std::errc()) return value;

    // Out of range: overflow when the value is at least 1, else underflow.
    // `magnitude` is the power of ten just above the leading nonzero digit.
    const bool negative = token.front() == '-';
    std::size_t i = negative ? 1 : 0;
    long long magnitude = 0;
    bool leading_found = false;
    for (; i < token.size() && isDigit(token[i]); ++i) {
        leading_found = leading_found || token[i] != '0';
        if (leading_found) ++magnitude;
    }
    if (i < token.size() && token[i] == '.') {
        for (++i; i < token.size() && isDigit(token[i]); ++i) {
            if (leading_found) continue;
            if (token[i] != '0') {
                leading_found = true;
            } else {
                --magnitude;
            }
        }
    }
    if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
        ++i;
        const bool negative_exponent = i < token.size() && token[i] == '-';
        if (i < token.size() && (token[i] == '-' || token[i] == '+')) ++i;
        long long exponent = 0;
        for (; i < token.size(); ++i) exponent = std::min(exponent * 10 + (token[i] - '0'), 1'000'000'000'000LL);
        magnitude += negative_exponent ? -exponent : exponent;
    }
    const double limit = magnitude > 0 ? std::numeric_limits<double>::infinity() : 0.0;
    return negative ? -limit : limit;
}

Value jsonInt(std::string_view token, Arena& arena) {
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec == std::errc()) return Value::integer(value);  // "-0" included
    // JSON's grammar already makes the digits canonical (no "+", no leading zeros).
    return Value::bigInteger(arena.copy(token));
}

// ------------------------------------------------------------- json.dumps

std::string_view pyTypeName(const Value& value, const JsonDumpOptions& options) {
    switch (value.kind()) {
        case ValueKind::undefined: return "Undefined";  // jinja2.runtime.Undefined, transformers' default
        case ValueKind::none: return "NoneType";
        case ValueKind::boolean: return "bool";
        case ValueKind::integer:
        case ValueKind::big_integer: return "int";
        case ValueKind::floating: return "float";
        case ValueKind::string: return "str";
        case ValueKind::list: return value.asList().tuple ? "tuple" : "list";
        case ValueKind::dict: return "dict";
        case ValueKind::namespace_: return "Namespace";  // jinja2.utils.Namespace
        case ValueKind::callable:
            return options.callable_type_name != nullptr ? options.callable_type_name(value)
                                                         : "builtin_function_or_method";
    }
    return "object";
}

void appendHex4(std::uint32_t unit, std::string& out) {
    static constexpr char kHex[] = "0123456789abcdef";  // json.dumps writes lowercase
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xf];
}

// json.dumps' string escaping (encode_basestring / encode_basestring_ascii).
void appendJsonString(std::string_view text, bool ensure_ascii, std::string& out) {
    out += '"';
    std::size_t copied = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        const bool plain = c >= 0x20 && c != '"' && c != '\\' && (!ensure_ascii || c < 0x7f);
        if (plain) {
            ++i;
            continue;
        }
        out.append(text, copied, i - copied);
        if (c >= 0x80) {
            unsigned length = 0;
            const std::uint32_t cp = decodeUtf8(reinterpret_cast<const unsigned char*>(text.data()) + i, length);
            if (cp >= 0x10000) {
                appendHex4(0xd800 + ((cp - 0x10000) >> 10), out);
                appendHex4(0xdc00 + ((cp - 0x10000) & 0x3ff), out);
            } else {
                appendHex4(cp, out);
            }
            i += length;
        } else {
            switch (c) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                case '\b': out += "\\b"; break;
                case '\f': out += "\\f"; break;
                default: appendHex4(c, out);  // other controls, and DEL under ensure_ascii
            }
            ++i;
        }
        copied = i;
    }
    out.append(text, copied, std::string_view::npos);
    out += '"';
}

// Python's float formatting in JSON (float.__repr__, with the JavaScript
// names for the non-finite values).
void appendJsonFloat(double value, std::string& out) {
    if (std::isnan(value)) {
        out += "NaN";
    } else if (std::isinf(value)) {
        out += value < 0 ? "-Infinity" : "Infinity";
    } else {
        appendPyFloatRepr(value, out);
    }
}

// ---- Python's `<` between dict keys, for sort_keys

int compareBigDigits(std::string_view a, std::string_view b) {
    const bool a_negative = a.front() == '-';
    const bool b_negative = b.front() == '-';
    if (a_negative != b_negative) return a_negative ? -1 : 1;
    int magnitude = 0;
    if (a.size() != b.size()) {
        magnitude = a.size() < b.size() ? -1 : 1;
    } else {
        const int c = a.compare(b);
        magnitude = c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    return a_negative ? -magnitude : magnitude;
}

int compareFloatInt64(double f, std::int64_t i) {
    constexpr double kTwo63 = 9223372036854775808.0;
    if (f < -kTwo63) return -1;
    if (f >= kTwo63) return 1;
    const double whole = std::trunc(f);
    const auto whole_int = static_cast<std::int64_t>(whole);  // in range: -2^63 <= whole < 2^63
    if (whole_int != i) return whole_int < i ? -1 : 1;
    const double fraction = f - whole;
    return fraction < 0 ? -1 : (fraction > 0 ? 1 : 0);
}

// `f` finite against an int beyond int64, exactly, as Python compares.
int compareFloatBig(double f, std::string_view big) {
    const bool big_negative = big.front() == '-';
    if (std::fabs(f) < 9223372036854775808.0) return big_negative ? 1 : -1;
    // |f| >= 2^63 is an integer: compare its exact decimal digits.
    char buf[400];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::fixed, 0);
    if (ec != std::errc()) return 0;  // 400 bytes hold any double's integer digits
    return compareBigDigits(std::string_view(buf, static_cast<std::size_t>(end - buf)), big);
}

constexpr int kUnordered = 2;

// Python's ordering of two numbers (bools as 0/1): -1, 0, 1 or kUnordered (NaN).
int compareNumbers(const Value& a, const Value& b) {
    auto asInt = [](const Value& v) -> std::int64_t { return v.isBool() ? (v.asBool() ? 1 : 0) : v.asInt(); };
    if (a.isFloat() && b.isFloat()) {
        const double x = a.asFloat();
        const double y = b.asFloat();
        if (std::isnan(x) || std::isnan(y)) return kUnordered;
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a.isFloat() || b.isFloat()) {
        const bool float_first = a.isFloat();
        const double f = float_first ? a.asFloat() : b.asFloat();
        const Value& other = float_first ? b : a;
        if (std::isnan(f)) return kUnordered;
        int c = 0;
        if (std::isinf(f)) {
            c = f < 0 ? -1 : 1;
        } else if (other.kind() == ValueKind::big_integer) {
            c = compareFloatBig(f, other.text());
        } else {
            c = compareFloatInt64(f, asInt(other));
        }
        return float_first ? c : -c;
    }
    const bool a_big = a.kind() == ValueKind::big_integer;
    const bool b_big = b.kind() == ValueKind::big_integer;
    if (a_big && b_big) return compareBigDigits(a.text(), b.text());
    if (a_big) return a.text().front() == '-' ? -1 : 1;  // beyond every int64
    if (b_big) return b.text().front() == '-' ? 1 : -1;
    const std::int64_t x = asInt(a);
    const std::int64_t y = asInt(b);
    return x < y ? -1 : (x > y ? 1 : 0);
}

// Which keys Python can order among themselves with `<`.
enum class KeyClass { string, number, other };

KeyClass keyClass(const Value& v) {
    if (v.isString()) return KeyClass::string;
    if (v.isNumber()) return KeyClass::number;
    return KeyClass::other;  // None, tuples...: `<` refuses them against anything else
}

// Orders a dict's entries as sorted(d.items()) does, or fails with the
// TypeError list.sort raises on the first pair of keys that do not compare.
class KeySorter {
public:
    KeySorter(const DictData& dict, const JsonDumpOptions& options) : dict_(dict), options_(options) {}

    std::optional<std::string> sort(std::vector<std::size_t>& order) {
        const std::size_t n = dict_.size;
        order.resize(n);
        std::iota(order.begin(), order.end(), std::size_t{0});
        if (n < 2) return std::nullopt;

        bool all_strings = true;
        bool all_ordered_numbers = true;
        for (std::size_t i = 0; i < n; ++i) {
            const Value& key = dict_.keys[i];
            all_strings = all_strings && key.isString();
            all_ordered_numbers =
                all_ordered_numbers && key.isNumber() && !(key.isFloat() && std::isnan(key.asFloat()));
        }
        // Keys are distinct, so a total order has one result whatever the algorithm.
        if (all_strings) {
            std::sort(order.begin(), order.end(),
                      [&](std::size_t a, std::size_t b) { return dict_.keys[a].text() < dict_.keys[b].text(); });
            return std::nullopt;
        }
        if (all_ordered_numbers) {
            std::sort(order.begin(), order.end(),
                      [&](std::size_t a, std::size_t b) { return compareNumbers(dict_.keys[a], dict_.keys[b]) < 0; });
            return std::nullopt;
        }

        // NaN or mixed kinds: where the result (NaN's place) or the error
        // (which pair fails first) depends on the algorithm, replay list.sort.
        // Below 64 entries that is one run extended by binary insertion,
        // exactly; above, its runs are replayed but not its merges.
        runPhase(order);
        if (error_) return error_;
        if (n < kMinMerge) return std::nullopt;
        const KeyClass first = keyClass(dict_.keys[order[0]]);
        for (std::size_t i = 1; i < n; ++i) {
            if (keyClass(dict_.keys[order[i]]) != first) {
                return unsupported(dict_.keys[order[i]], dict_.keys[order[0]]);
            }
        }
        if (first != KeyClass::number) return std::nullopt;  // tuples: converting the first key fails anyway
        // Numbers with a NaN among them: any stable order (CPython's merges may differ).
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return compareNumbers(dict_.keys[a], dict_.keys[b]) < 0;
        });
        return std::nullopt;
    }

private:
    static constexpr std::size_t kMinMerge = 64;

    std::string unsupported(const Value& a, const Value& b) const {
        return "'<' not supported between instances of '" + std::string(pyTypeName(a, options_)) + "' and '" +
               std::string(pyTypeName(b, options_)) + "'";
    }

    // a < b, recording the TypeError of an incomparable pair.
    bool less(std::size_t a, std::size_t b) {
        if (error_) return false;
        const Value& x = dict_.keys[a];
        const Value& y = dict_.keys[b];
        const KeyClass cx = keyClass(x);
        // Tuples order among themselves in Python; which comes first does
        // not matter here, as converting a tuple key fails next anyway.
        if (x.isList() && y.isList()) return false;
        if (cx != keyClass(y) || cx == KeyClass::other) {
            error_ = unsupported(x, y);
            return false;
        }
        if (cx == KeyClass::string) return x.text() < y.text();
        return compareNumbers(x, y) == -1;
    }

    static std::size_t minRun(std::size_t n) {
        std::size_t r = 0;
        while (n >= kMinMerge) {
            r |= n & 1;
            n >>= 1;
        }
        return n + r;
    }

    // CPython's count_run: the length of the ascending (or strictly descending) run at lo.
    std::size_t countRun(const std::vector<std::size_t>& order, std::size_t lo, std::size_t hi, bool& descending) {
        descending = false;
        if (lo + 1 == hi) return 1;
        std::size_t i = lo + 1;
        if (less(order[i], order[i - 1])) {
            descending = true;
            for (++i; i < hi && less(order[i], order[i - 1]);) ++i;
        } else {
            for (++i; i < hi && !less(order[i], order[i - 1]);) ++i;
        }
        return i - lo;
    }

    // CPython's binarysort: [lo, start) is sorted; insert [start, hi).
    void binarySort(std::vector<std::size_t>& order, std::size_t lo, std::size_t hi, std::size_t start) {
        if (start == lo) ++start;
        for (; start < hi && !error_; ++start) {
            const std::size_t pivot = order[start];
            std::size_t l = lo;
            std::size_t r = start;
            do {
                const std::size_t p = l + ((r - l) >> 1);
                if (less(pivot, order[p])) {
                    r = p;
                } else {
                    l = p + 1;
                }
            } while (l < r);
            std::move_backward(order.begin() + static_cast<std::ptrdiff_t>(l),
                               order.begin() + static_cast<std::ptrdiff_t>(start),
                               order.begin() + static_cast<std::ptrdiff_t>(start) + 1);
            order[l] = pivot;
        }
    }

    void runPhase(std::vector<std::size_t>& order) {
        const std::size_t n = order.size();
        const std::size_t min_run = minRun(n);
        std::size_t lo = 0;
        while (lo < n && !error_) {
            const std::size_t remaining = n - lo;
            bool descending = false;
            std::size_t run = countRun(order, lo, n, descending);
            if (error_) return;
            if (descending) {
                std::reverse(order.begin() + static_cast<std::ptrdiff_t>(lo),
                             order.begin() + static_cast<std::ptrdiff_t>(lo + run));
            }
            if (run < min_run) {
                const std::size_t force = std::min(remaining, min_run);
                binarySort(order, lo, lo + force, lo + run);
                run = force;
            }
            lo += run;
        }
    }

    const DictData& dict_;
    const JsonDumpOptions& options_;
    std::optional<std::string> error_;
};

// The escaped size of `text` in a JSON string, quotes excluded.
std::size_t jsonStringSize(std::string_view text, bool ensure_ascii) {
    std::size_t size = 0;
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            const bool plain = c >= 0x20 && c != '"' && c != '\\' && (!ensure_ascii || c < 0x7f);
            const bool short_escape =
                c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f';
            size += plain ? 1 : short_escape ? 2 : 6;
            ++i;
            continue;
        }
        const std::size_t length = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        size += !ensure_ascii ? length : length == 4 ? 12 : 6;
        i += length;
    }
    return size;
}

// json.dumps over a value, depth first with a stack of its own.
class JsonDumper {
public:
    JsonDumper(const JsonDumpOptions& options, std::string& out)
        : options_(options),
          out_(out),
          item_separator_(options.item_separator ? std::string_view(*options.item_separator)
                                                 : std::string_view(options.indent ? "," : ", ")),
          key_separator_(options.key_separator ? std::string_view(*options.key_separator) : std::string_view(": ")) {}

    std::optional<std::string> dump(const Value& root) {
        if (auto error = enter(root)) return error;
        while (!stack_.empty()) {
            // `frame` is not used after enter(), which may move the stack.
            Frame& frame = stack_.back();
            const std::size_t depth = stack_.size();
            const bool is_list = frame.list != nullptr;
            const std::size_t size = is_list ? frame.list->size : frame.dict->size;
            if (frame.next == size) {
                newline(depth - 1);
                out_ += is_list ? ']' : '}';
                stack_.pop_back();
                continue;
            }
            const std::size_t n = frame.next++;
            if (n != 0) {
                room(item_separator_.size(), "tojson separators");
                out_ += item_separator_;
                newline(depth);
            }
            if (is_list) {
                if (auto error = enter(frame.list->items[n])) return error;
                continue;
            }
            const std::size_t i = frame.order.empty() ? n : frame.order[n];
            const DictData& dict = *frame.dict;
            if (auto error = dumpKey(dict.keys[i])) return error;
            room(key_separator_.size(), "tojson separators");
            out_ += key_separator_;
            if (auto error = enter(dict.values[i])) return error;
        }
        return std::nullopt;
    }

private:
    struct Frame {
        const ListData* list;
        const DictData* dict;
        std::vector<std::size_t> order;  // sort_keys: the entries in key order
        std::size_t next = 0;
    };

    static std::string tooDeep() {
        return "maximum recursion depth exceeded while encoding a JSON object (a value may nest at most " +
               std::to_string(kMaxValueDepth) + " levels)";
    }

    // Whether `more` bytes fit after the text so far.
    bool fits(std::size_t more) const {
        if (options_.room == nullptr) return true;
        const std::size_t room = options_.room->roomBytes();
        return out_.size() <= room && more <= room - out_.size();
    }
    // Throws (ArenaLimitExceeded) unless `more` bytes fit after the text so far.
    void room(std::size_t more, const char* what) const {
        if (!fits(more)) options_.room->ensureRoom(Arena::kMaxBytes + 1, what);
    }

    // A scalar is written at once; a list or dict opens a frame.
    std::optional<std::string> enter(const Value& value) {
        if (options_.work != nullptr) options_.work->charge(1);
        switch (value.kind()) {
            case ValueKind::none: out_ += "null"; return std::nullopt;
            case ValueKind::boolean: out_ += value.asBool() ? "true" : "false"; return std::nullopt;
            case ValueKind::integer: appendInt(value.asInt()); return std::nullopt;
            case ValueKind::big_integer:
                if (intDigitCount(value.text()) > kPyIntMaxStrDigits) return std::string(kIntDigitsLimitToText);
                room(value.text().size(), "tojson");
                out_ += value.text();
                return std::nullopt;
            case ValueKind::floating: appendJsonFloat(value.asFloat(), out_); return std::nullopt;
            case ValueKind::string: appendString(value.text()); return std::nullopt;
            case ValueKind::list:
                if (value.asList().size == 0) {
                    out_ += "[]";
                    return std::nullopt;
                }
                if (stack_.size() == kMaxValueDepth) return tooDeep();
                stack_.push_back({&value.asList(), nullptr, {}, 0});
                out_ += '[';
                newline(stack_.size());
                return std::nullopt;
            case ValueKind::dict: {
                const DictData& dict = value.asDict();
                if (dict.size == 0) {
                    out_ += "{}";
                    return std::nullopt;
                }
                if (stack_.size() == kMaxValueDepth) return tooDeep();
                std::vector<std::size_t> order;
                if (options_.sort_keys) {
                    if (options_.work != nullptr) options_.work->charge(dict.size);
                    if (auto error = KeySorter(dict, options_).sort(order)) return error;
                }
                stack_.push_back({nullptr, &dict, std::move(order), 0});
                out_ += '{';
                newline(stack_.size());
                return std::nullopt;
            }
            case ValueKind::undefined:
            case ValueKind::namespace_:
            case ValueKind::callable: break;
        }
        return "Object of type " + std::string(pyTypeName(value, options_)) + " is not JSON serializable";
    }

    void appendInt(std::int64_t value) {
        char buf[24];
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
        out_.append(buf, end);
    }

    void appendString(std::string_view text) {
        // At most 6 bytes out per byte in; the exact size only when that bound does not fit.
        if (text.size() > (Arena::kMaxBytes - 2) / 6 || !fits(6 * text.size() + 2)) {
            room(jsonStringSize(text, options_.ensure_ascii) + 2, "tojson");
        }
        appendJsonString(text, options_.ensure_ascii, out_);
    }

    // A line break and the indent once per level, when indenting.
    void newline(std::size_t depth) {
        if (!options_.indent) return;
        const std::string& indent = *options_.indent;
        if (!indent.empty() && depth > (Arena::kMaxBytes - 1) / indent.size()) room(SIZE_MAX, "tojson indent");
        room(1 + depth * indent.size(), "tojson indent");
        out_ += '\n';
        for (std::size_t i = 0; i < depth; ++i) out_ += indent;
    }

    // JSON keys are strings: Python converts the other scalar keys.
    std::optional<std::string> dumpKey(const Value& key) {
        switch (key.kind()) {
            case ValueKind::string: appendString(key.text()); return std::nullopt;
            case ValueKind::floating:
                out_ += '"';
                appendJsonFloat(key.asFloat(), out_);
                out_ += '"';
                return std::nullopt;
            case ValueKind::boolean:
            case ValueKind::none:
            case ValueKind::integer:
            case ValueKind::big_integer: {
                out_ += '"';
                if (auto error = enter(key)) return error;
                out_ += '"';
                return std::nullopt;
            }
            default: return "keys must be str, int, float, bool or None, not " + std::string(pyTypeName(key, options_));
        }
    }

    const JsonDumpOptions& options_;
    std::string& out_;
    std::string_view item_separator_;
    std::string_view key_separator_;
    std::vector<Frame> stack_;
};

// ------------------------------------------------------------- json.loads

// CPython's C scanner, step for step, over UTF-8 bytes; positions in error
// messages are converted to code point indexes as Python counts them.
class JsonLoader {
public:
    JsonLoader(std::string_view text, Arena& arena) : text_(text), arena_(arena) {}

    std::optional<JsonLoadError> load(Value& out) {
        if (text_.substr(0, 3) == "\xef\xbb\xbf") {
            fail("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0);
            return error_;
        }
        std::size_t pos = skipWhitespace(0);
        if (!document(pos, out)) return error_;
        pos = skipWhitespace(pos);
        if (pos != text_.size()) {
            fail("Extra data", pos);
            return error_;
        }
        if (lone_surrogate_at_ != kNone) {
            std::string message = "Lone surrogate ";
            appendHex4(lone_surrogate_, message);
            message += " cannot be represented in UTF-8";
            fail(message, lone_surrogate_at_);
            return error_;
        }
        return std::nullopt;
    }

private:
    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

    char at(std::size_t pos) const { return text_[pos]; }
    bool startsWith(std::size_t pos, std::string_view word) const { return text_.substr(pos, word.size()) == word; }

    std::size_t skipWhitespace(std::size_t pos) const {
        while (pos < text_.size() && (at(pos) == ' ' || at(pos) == '\t' || at(pos) == '\n' || at(pos) == '\r')) ++pos;
        return pos;
    }

    // JSONDecodeError's text: "msg: line L column C (char N)", N in code points.
    bool fail(std::string_view message, std::size_t byte_pos) {
        std::size_t chars = 0;
        std::size_t line = 1;
        std::size_t last_newline = kNone;  // code point index
        for (std::size_t i = 0; i < byte_pos && i < text_.size(); ++i) {
            const auto c = static_cast<unsigned char>(text_[i]);
            if ((c & 0xc0) == 0x80) continue;  // continuation byte
            if (c == '\n') {
                ++line;
                last_newline = chars;
            }
            ++chars;
        }
        const std::size_t column = last_newline == kNone ? chars + 1 : chars - last_newline;
        error_ = JsonLoadError{std::string(message) + ": line " + std::to_string(line) + " column " +
                                   std::to_string(column) + " (char " + std::to_string(chars) + ")",
                               false};
        return false;
    }

    bool failTooDeep(bool object) {
        error_ = JsonLoadError{std::string("maximum recursion depth exceeded while decoding a JSON ") +
                                   (object ? "object" : "array") + " from a unicode string",
                               true};
        return false;
    }

    // scan_once over the document, with a stack of the arrays and objects
    // still open instead of recursion; errors as the recursive scanner
    // meets them.
    bool document(std::size_t& pos, Value& out) {
        struct Open {
            bool object;
            std::string_view key;  // object: the key of the value being read
        };
        std::vector<Open> open;
        std::vector<ListBuilder> lists;
        std::vector<DictBuilder> dicts;
        const std::size_t size = text_.size();
        for (;;) {
            // A value at `pos` (whitespace skipped).
            Value done;
            if (pos < size && (at(pos) == '[' || at(pos) == '{')) {
                const bool object = at(pos) == '{';
                if (open.size() >= static_cast<std::size_t>(kJsonMaxDepth)) return failTooDeep(object);
                pos = skipWhitespace(pos + 1);
                if (pos < size && at(pos) == (object ? '}' : ']')) {
                    ++pos;
                    done = object ? DictBuilder(arena_).finish() : ListBuilder(arena_).finish();
                } else {
                    open.push_back({object, {}});
                    if (!object) {
                        lists.emplace_back(arena_);
                        continue;
                    }
                    dicts.emplace_back(arena_);
                    if (!key(pos, open.back().key)) return false;
                    continue;
                }
            } else if (!scalar(pos, done)) {
                return false;
            }
            // `done` is complete: into its container, closing those it completes.
            for (;;) {
                if (open.empty()) {
                    out = done;
                    return true;
                }
                Open& top = open.back();
                pos = skipWhitespace(pos);
                if (top.object) {
                    dicts.back().set(top.key, done);
                } else {
                    lists.back().push(done);
                }
                if (pos < size && at(pos) == (top.object ? '}' : ']')) {
                    ++pos;
                    if (top.object) {
                        done = dicts.back().finish();
                        dicts.pop_back();
                    } else {
                        done = lists.back().finish();
                        lists.pop_back();
                    }
                    open.pop_back();
                    continue;
                }
                if (pos >= size || at(pos) != ',') return fail("Expecting ',' delimiter", pos);
                pos = skipWhitespace(pos + 1);
                if (top.object && !key(pos, top.key)) return false;
                break;
            }
        }
    }

    // An object's `"key" :` and the whitespace after it.
    bool key(std::size_t& pos, std::string_view& out) {
        if (pos >= text_.size() || at(pos) != '"') {
            return fail("Expecting property name enclosed in double quotes", pos);
        }
        if (!string(pos, out)) return false;
        pos = skipWhitespace(pos);
        if (pos >= text_.size() || at(pos) != ':') return fail("Expecting ':' delimiter", pos);
        pos = skipWhitespace(pos + 1);
        return true;
    }

    // A value other than an array or an object, at `pos`.
    bool scalar(std::size_t& pos, Value& out) {
        if (pos >= text_.size()) return fail("Expecting value", pos);
        switch (at(pos)) {
            case '"': {
                std::string_view s;
                if (!string(pos, s)) return false;
                out = Value::string(s);
                return true;
            }
            case 'n':
                if (startsWith(pos, "null")) return constant(pos, 4, Value::none(), out);
                break;
            case 't':
                if (startsWith(pos, "true")) return constant(pos, 4, Value::boolean(true), out);
                break;
            case 'f':
                if (startsWith(pos, "false")) return constant(pos, 5, Value::boolean(false), out);
                break;
            case 'N':
                if (startsWith(pos, "NaN")) {
                    return constant(pos, 3, Value::floating(std::numeric_limits<double>::quiet_NaN()), out);
                }
                break;
            case 'I':
                if (startsWith(pos, "Infinity")) {
                    return constant(pos, 8, Value::floating(std::numeric_limits<double>::infinity()), out);
                }
                break;
            case '-':
                if (startsWith(pos, "-Infinity")) {
                    return constant(pos, 9, Value::floating(-std::numeric_limits<double>::infinity()), out);
                }
                break;
            default: break;
        }
        return number(pos, out);
    }

    static bool constant(std::size_t& pos, std::size_t length, Value v, Value& out) {
        pos += length;
        out = v;
        return true;
    }

    // _match_number_unicode, including its backtracking: "1." and "1e" are
    // the int 1 followed by whatever comes next.
    bool number(std::size_t& pos, Value& out) {
        const std::size_t start = pos;
        const std::size_t size = text_.size();
        std::size_t i = pos;
        if (at(i) == '-') {
            ++i;
            if (i >= size) return fail("Expecting value", start);
        }
        if (at(i) >= '1' && at(i) <= '9') {
            for (++i; i < size && isDigit(at(i));) ++i;
        } else if (at(i) == '0') {
            ++i;
        } else {
            return fail("Expecting value", start);
        }
        bool is_float = false;
        if (i + 1 < size && at(i) == '.' && isDigit(at(i + 1))) {
            is_float = true;
            for (i += 2; i < size && isDigit(at(i));) ++i;
        }
        if (i + 1 < size && (at(i) == 'e' || at(i) == 'E')) {
            const std::size_t e_at = i++;
            if (i + 1 < size && (at(i) == '-' || at(i) == '+')) ++i;
            while (i < size && isDigit(at(i))) ++i;
            if (isDigit(at(i - 1))) {
                is_float = true;
            } else {
                i = e_at;
            }
        }
        const std::string_view token = text_.substr(start, i - start);
        if (is_float) {
            out = Value::floating(jsonFloat(token));
        } else {
            const std::size_t digits = intDigitCount(token);
            if (digits > kPyIntMaxStrDigits) {
                // int() raises ValueError, not JSONDecodeError: no position.
                error_ = JsonLoadError{"Exceeds the limit (4300 digits) for integer string conversion: value has " +
                                           std::to_string(digits) +
                                           " digits; use sys.set_int_max_str_digits() to increase the limit",
                                       false};
                return false;
            }
            out = jsonInt(token, arena_);
        }
        pos = i;
        return true;
    }

    bool hex4(std::size_t pos, std::uint32_t& unit) const {
        if (pos + 4 > text_.size()) return false;
        unit = 0;
        for (std::size_t i = pos; i < pos + 4; ++i) {
            const char c = at(i);
            unit <<= 4;
            if (isDigit(c)) {
                unit |= static_cast<std::uint32_t>(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                unit |= static_cast<std::uint32_t>(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                unit |= static_cast<std::uint32_t>(c - 'A' + 10);
            } else {
                return false;
            }
        }
        return true;
    }

    void appendUtf8(std::uint32_t cp) {
        if (cp < 0x80) {
            scratch_ += static_cast<char>(cp);
        } else if (cp < 0x800) {
            scratch_ += static_cast<char>(0xc0 | (cp >> 6));
            scratch_ += static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            scratch_ += static_cast<char>(0xe0 | (cp >> 12));
            scratch_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            scratch_ += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
            scratch_ += static_cast<char>(0xf0 | (cp >> 18));
            scratch_ += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
            scratch_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            scratch_ += static_cast<char>(0x80 | (cp & 0x3f));
        }
    }

    // scanstring_unicode in strict mode; `pos` at the opening quote. A string
    // without escapes is a view of the text.
    bool string(std::size_t& pos, std::string_view& out) {
        const std::size_t begin = pos;
        const std::size_t size = text_.size();
        bool escaped = false;
        std::size_t chunk = pos + 1;  // start of the bytes not yet copied
        while (true) {
            std::size_t i = chunk;
            for (; i < size; ++i) {
                const auto c = static_cast<unsigned char>(at(i));
                if (c == '"' || c == '\\') break;
                if (c < 0x20) return fail("Invalid control character at", i);
            }
            if (i >= size) return fail("Unterminated string starting at", begin);
            if (at(i) == '"') {
                if (escaped) {
                    scratch_.append(text_, chunk, i - chunk);
                    out = arena_.copy(scratch_);
                } else {
                    out = text_.substr(begin + 1, i - begin - 1);
                }
                pos = i + 1;
                return true;
            }
            if (!escaped) {
                escaped = true;
                scratch_.clear();
            }
            scratch_.append(text_, chunk, i - chunk);
            const std::size_t e = i + 1;  // the escape's letter
            if (e >= size) return fail("Unterminated string starting at", begin);
            if (at(e) != 'u') {
                char c = 0;
                switch (at(e)) {
                    case '"':
                    case '\\':
                    case '/': c = at(e); break;
                    case 'b': c = '\b'; break;
                    case 'f': c = '\f'; break;
                    case 'n': c = '\n'; break;
                    case 'r': c = '\r'; break;
                    case 't': c = '\t'; break;
                    default: return fail("Invalid \\escape", i);
                }
                scratch_ += c;
                chunk = e + 1;
                continue;
            }
            // Python wants one more character after the four digits (the
            // closing quote at least) before it reads them.
            std::uint32_t cp = 0;
            if (e + 5 >= size || !hex4(e + 1, cp)) return fail("Invalid \\uXXXX escape", e);
            std::size_t next = e + 5;
            // A high surrogate takes a following \uXXXX when one more
            // character follows that; a non-low second unit is read again
            // on its own.
            if (cp >= 0xd800 && cp <= 0xdbff && next + 6 < size && at(next) == '\\' && at(next + 1) == 'u') {
                std::uint32_t low = 0;
                if (!hex4(next + 2, low)) return fail("Invalid \\uXXXX escape", next + 1);
                if (low >= 0xdc00 && low <= 0xdfff) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                    next += 6;
                }
            }
            if (cp >= 0xd800 && cp <= 0xdfff) {
                // Python keeps the lone surrogate; UTF-8 cannot. Fail at the
                // end, so a text Python refuses for another reason gets
                // Python's message.
                if (lone_surrogate_at_ == kNone) {
                    lone_surrogate_at_ = i;
                    lone_surrogate_ = cp;
                }
                cp = 0xfffd;
            }
            appendUtf8(cp);
            chunk = next;
        }
    }

    std::string_view text_;
    Arena& arena_;
    std::string scratch_;
    std::optional<JsonLoadError> error_;
    std::size_t lone_surrogate_at_ = kNone;  // the first one's backslash
    std::uint32_t lone_surrogate_ = 0;
};

}  // namespace

std::optional<std::string> pyJsonDumps(const Value& value, const JsonDumpOptions& options, std::string& out) {
    const std::size_t mark = out.size();
    auto error = JsonDumper(options, out).dump(value);
    if (error) out.resize(mark);
    return error;
}

std::optional<JsonLoadError> pyJsonLoads(std::string_view text, Arena& arena, Value& out) {
    return JsonLoader(text, arena).load(out);
}

Value pyJsonNumber(std::string_view json_number_text, Arena& arena) {
    const bool is_float = json_number_text.find_first_of(".eE") != std::string_view::npos;
    return is_float ? Value::floating(jsonFloat(json_number_text)) : jsonInt(json_number_text, arena);
}

}  // namespace dpgate::admission::jinja
