// A usage reader of another design, usage_reader_bench's peer: a
// hand-written JSON grammar for a non-stream answer's usage object, nlohmann
// for SSE events (gateway/metrics/usage_parser.cpp at commit 23b3dab).
// Nothing in the gateway links it.
#include "legacy_usage_reader.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <cstring>

namespace dpgate::bench::legacy {
namespace {

using Json = nlohmann::json;

std::optional<Json> parseObject(std::string_view text) noexcept {
    try {
        Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
        if (!j.is_object()) return std::nullopt;
        return j;
    } catch (...) {  // bad_alloc, or anything nlohmann might still throw
        return std::nullopt;
    }
}

std::optional<uint64_t> tokenCount(const Json& object, const char* key) {
    auto it = object.find(key);
    if (it == object.end()) return std::nullopt;
    if (it->is_number_unsigned()) return it->get<uint64_t>();
    if (it->is_number_integer() && it->get<int64_t>() >= 0) return static_cast<uint64_t>(it->get<int64_t>());
    return std::nullopt;
}

std::optional<Usage> usageOf(const Json& doc) {
    auto it = doc.find("usage");
    if (it == doc.end() || !it->is_object()) return std::nullopt;
    const auto prompt = tokenCount(*it, "prompt_tokens");
    const auto completion = tokenCount(*it, "completion_tokens");
    if (!prompt && !completion) return std::nullopt;
    Usage u;
    u.prompt_tokens = prompt.value_or(0);
    u.completion_tokens = completion.value_or(0);
    auto details = it->find("prompt_tokens_details");
    if (details != it->end() && details->is_object())
        u.cached_prompt_tokens = tokenCount(*details, "cached_tokens").value_or(0);
    return u;
}

bool isUsageOnly(const Json& doc) {
    auto choices = doc.find("choices");
    return choices != doc.end() && choices->is_array() && choices->empty() && usageOf(doc).has_value();
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Cheap pre-check so token chunks (`"usage":null` or no usage at all) are
// not parsed: only a `"usage"` key whose value starts with '{' can matter.
bool mayHoldUsageObject(std::string_view data) {
    constexpr std::string_view key = "\"usage\"";
    for (size_t pos = data.find(key); pos != std::string_view::npos; pos = data.find(key, pos + 1)) {
        size_t i = pos + key.size();
        while (i < data.size() && isSpace(data[i])) ++i;
        if (i >= data.size() || data[i] != ':') continue;
        ++i;
        while (i < data.size() && isSpace(data[i])) ++i;
        if (i < data.size() && data[i] == '{') return true;
    }
    return false;
}

// True when every `"usage"` key in the raw event is `"usage":null` on the
// same line: the token chunks of an include_usage stream, skipped without
// extracting their data.
bool onlyNullUsage(std::string_view event) {
    constexpr std::string_view key = "\"usage\"";
    for (size_t pos = event.find(key); pos != std::string_view::npos; pos = event.find(key, pos + 1)) {
        size_t i = pos + key.size();
        while (i < event.size() && (event[i] == ' ' || event[i] == '\t')) ++i;
        if (i >= event.size() || event[i] != ':') return false;
        ++i;
        while (i < event.size() && (event[i] == ' ' || event[i] == '\t')) ++i;
        if (event.substr(i, 4) != "null") return false;
    }
    return true;
}

// Index just past the quote that closes the string opened at json[open],
// or npos when it does not close. The text between goes by memchr: an
// answer is mostly the text of its message.
size_t skipString(std::string_view json, size_t open) {
    size_t i = open + 1;
    while (i < json.size()) {
        const void* quote = std::memchr(json.data() + i, '"', json.size() - i);
        if (quote == nullptr) return std::string_view::npos;
        const size_t at = size_t(static_cast<const char*>(quote) - json.data());
        size_t k = at;
        while (k > open + 1 && json[k - 1] == '\\') --k;
        if ((at - k) % 2 == 0) return at + 1;  // not escaped
        i = at + 1;
    }
    return std::string_view::npos;
}

// The value of `key` in the top-level object of `json`, found by a
// structural scan (strings and nesting respected) without building a DOM:
// an answer's text may be long, its usage object is a few dozen bytes.
// Empty when the key is absent or the document does not close (a cut
// answer counts nothing).
std::string_view topLevelValue(std::string_view json, std::string_view key) {
    std::string_view found;
    int depth = 0;
    size_t i = 0;
    const size_t n = json.size();
    while (i < n) {
        const char c = json[i];
        if (c == '"') {
            const size_t end = skipString(json, i);
            if (end == std::string_view::npos) return {};
            const std::string_view token = json.substr(i + 1, end - i - 2);
            i = end;
            if (depth != 1 || token != key) continue;
            while (i < n && isSpace(json[i])) ++i;
            if (i >= n || json[i] != ':') continue;  // a string value, not a key
            ++i;
            while (i < n && isSpace(json[i])) ++i;
            const size_t value_start = i;
            int value_depth = 0;
            while (i < n) {
                const char v = json[i];
                if (v == '"') {
                    i = skipString(json, i);
                    if (i == std::string_view::npos) return {};
                    continue;
                }
                if (v == '{' || v == '[') {
                    ++value_depth;
                } else if (v == '}' || v == ']') {
                    if (value_depth == 0) break;
                    if (--value_depth == 0) {
                        ++i;
                        break;
                    }
                } else if (v == ',' && value_depth == 0) {
                    break;
                }
                ++i;
            }
            if (found.empty()) found = json.substr(value_start, std::min(i, n) - value_start);
            continue;
        }
        if (c == '{' || c == '[') ++depth;
        if (c == '}' || c == ']') --depth;
        ++i;
    }
    size_t last = json.find_last_not_of(" \t\r\n");
    bool closed = depth == 0 && last != std::string_view::npos && json[last] == '}' && json.front() == '{';
    return closed ? found : std::string_view();
}

// A small validating reader for the usage object of an answer (a few dozen
// bytes): what a DOM parse would accept, without building one. Keys are
// compared as written (no escape decoding); a repeated key counts its last value.
class UsageReader {
public:
    explicit UsageReader(std::string_view text) : s_(text) {}

    // The object at the start of the text, which must be all of it.
    std::optional<Usage> read() {
        std::optional<uint64_t> prompt, completion, cached;
        bool details_seen = false;
        const bool ok = object(0, [&](std::string_view key) -> bool {
            if (key == "prompt_tokens") return integer(prompt);
            if (key == "completion_tokens") return integer(completion);
            if (key == "prompt_tokens_details" && peek() == '{') {
                details_seen = true;
                cached.reset();
                return object(1, [&](std::string_view inner) -> bool {
                    if (inner == "cached_tokens") return integer(cached);
                    return value(2);
                });
            }
            return value(1);
        });
        skipSpace();
        if (!ok || i_ != s_.size() || (!prompt && !completion)) return std::nullopt;
        Usage u;
        u.prompt_tokens = prompt.value_or(0);
        u.completion_tokens = completion.value_or(0);
        u.cached_prompt_tokens = details_seen ? cached.value_or(0) : 0;
        return u;
    }

private:
    static constexpr int kMaxDepth = 64;

    char peek() {
        skipSpace();
        return i_ < s_.size() ? s_[i_] : '\0';
    }
    void skipSpace() {
        while (i_ < s_.size() && isSpace(s_[i_])) ++i_;
    }

    template <typename OnMember>
    bool object(int depth, OnMember&& on_member) {
        if (depth > kMaxDepth || peek() != '{') return false;
        ++i_;
        if (peek() == '}') {
            ++i_;
            return true;
        }
        while (true) {
            std::string_view key;
            if (peek() != '"' || !string(&key) || peek() != ':') return false;
            ++i_;
            if (!on_member(key)) return false;
            const char next = peek();
            ++i_;
            if (next == '}') return true;
            if (next != ',') return false;
        }
    }

    bool array(int depth) {
        if (depth > kMaxDepth) return false;
        ++i_;  // '['
        if (peek() == ']') {
            ++i_;
            return true;
        }
        while (true) {
            if (!value(depth + 1)) return false;
            const char next = peek();
            ++i_;
            if (next == ']') return true;
            if (next != ',') return false;
        }
    }

    bool value(int depth) {
        switch (peek()) {
            case '{': return object(depth + 1, [&](std::string_view) { return value(depth + 1); });
            case '[': return array(depth + 1);
            case '"': return string(nullptr);
            case 't': return literal("true");
            case 'f': return literal("false");
            case 'n': return literal("null");
            default: {
                bool integral = false;
                return number(integral);
            }
        }
    }

    bool literal(std::string_view word) {
        if (s_.substr(i_, word.size()) != word) return false;
        i_ += word.size();
        return true;
    }

    bool string(std::string_view* raw) {
        const size_t start = ++i_;  // past '"'
        while (i_ < s_.size()) {
            const auto c = static_cast<unsigned char>(s_[i_]);
            if (c == '"') {
                if (raw) *raw = s_.substr(start, i_ - start);
                ++i_;
                return true;
            }
            if (c < 0x20) return false;
            if (c != '\\') {
                ++i_;
                continue;
            }
            if (++i_ >= s_.size()) return false;
            const char e = s_[i_++];
            if (e == 'u') {
                for (int k = 0; k < 4; ++k, ++i_)
                    if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
            } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
                return false;
            }
        }
        return false;
    }

    // JSON number grammar; `integral` when it has no fraction or exponent.
    bool number(bool& integral) {
        const size_t start = i_;
        auto digits = [&] {
            const size_t from = i_;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
            return i_ - from;
        };
        if (i_ < s_.size() && s_[i_] == '-') ++i_;
        const size_t int_start = i_;
        const size_t int_digits = digits();
        if (int_digits == 0 || (int_digits > 1 && s_[int_start] == '0')) return false;
        integral = true;
        if (i_ < s_.size() && s_[i_] == '.') {
            ++i_;
            if (digits() == 0) return false;
            integral = false;
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            ++i_;
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
            if (digits() == 0) return false;
            integral = false;
        }
        return i_ > start;
    }

    // A token count: a non-negative integer that fits; anything else leaves
    // it unset (and is still valid JSON to step over).
    bool integer(std::optional<uint64_t>& out) {
        out.reset();
        const char c = peek();
        if (c == '-' || (c >= '0' && c <= '9')) {
            const size_t start = i_;
            bool integral = false;
            if (!number(integral)) return false;
            uint64_t v = 0;
            if (integral && s_[start] != '-') {
                auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + i_, v);
                if (ec == std::errc() && end == s_.data() + i_) out = v;
            } else if (integral && i_ - start == 2 && s_[start + 1] == '0') {
                out = 0;  // -0 is an integer zero
            }
            return true;
        }
        return value(1);
    }

    std::string_view s_;
    size_t i_ = 0;
};

}  // namespace

std::optional<Usage> parseUsageJson(std::string_view json) noexcept {
    try {
        std::string_view usage = topLevelValue(json, "usage");
        if (!usage.empty() && usage.front() == '{') return UsageReader(usage).read();
        auto doc = parseObject(json);
        if (!doc) return std::nullopt;
        return usageOf(*doc);
    } catch (...) {
        return std::nullopt;
    }
}

bool isUsageOnlyChunk(std::string_view json) noexcept {
    if (!mayHoldUsageObject(json)) return false;
    auto doc = parseObject(json);
    if (!doc) return false;
    try {
        return isUsageOnly(*doc);
    } catch (...) {
        return false;
    }
}

std::string sseEventData(std::string_view event) {
    std::string data;
    bool any = false;
    size_t pos = 0;
    while (pos < event.size()) {
        size_t end = event.find_first_of("\r\n", pos);
        if (end == std::string_view::npos) end = event.size();
        std::string_view line = event.substr(pos, end - pos);
        // Skip the terminator: CRLF counts as one.
        pos = end;
        if (pos < event.size() && event[pos] == '\r') ++pos;
        if (end < event.size() && event[end] == '\r' && pos < event.size() && event[pos] == '\n') ++pos;
        else if (end < event.size() && event[end] == '\n') ++pos;

        if (!line.starts_with("data")) continue;
        std::string_view value;
        if (line.size() == 4) {
            value = {};
        } else if (line[4] == ':') {
            value = line.substr(5);
            if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        } else {
            continue;  // a field named e.g. "database"
        }
        if (any) data += '\n';
        data.append(value);
        any = true;
    }
    return data;
}

bool SseUsageParser::onEvent(std::string_view event, bool filtering) {
    // Skip the parse unless the event can hold a usage object: most events
    // are one token each and this runs for every one of them.
    if (onlyNullUsage(event)) {
        if (event.find("[DONE]") != std::string_view::npos && sseEventData(event) == "[DONE]") saw_done_ = true;
        return false;
    }
    const std::string data = sseEventData(event);
    if (!mayHoldUsageObject(data)) return false;
    auto doc = parseObject(data);
    if (!doc) return false;
    try {
        if (auto u = usageOf(*doc)) usage_ = *u;
        if (isUsageOnly(*doc)) {
            saw_usage_only_ = true;
            if (filtering) {
                ++dropped_events_;
                return true;
            }
        }
    } catch (...) {
    }
    return false;
}

void SseUsageParser::observe(std::string_view bytes) { feed(bytes, nullptr); }

void SseUsageParser::filter(std::string_view bytes, std::string& forward) { feed(bytes, &forward); }

void SseUsageParser::feed(std::string_view bytes, std::string* forward) {
    const bool filtering = forward != nullptr;
    size_t i = 0;
    while (i < bytes.size()) {
        const char c = bytes[i];
        if (pending_cr_) {
            pending_cr_ = false;
            if (c == '\n') {
                // The LF of a CRLF: it belongs with its CR, which ended either
                // an event (forward it only if that event was forwarded) or a
                // line of the current event.
                if (cr_ended_event_) {
                    if (filtering && !last_dropped_) forward->push_back(c);
                } else if (overflowed_) {
                    if (filtering) forward->push_back(c);
                } else {
                    event_.push_back(c);
                }
                cr_ended_event_ = false;
                ++i;
                continue;
            }
            cr_ended_event_ = false;
        }
        if (c != '\n' && c != '\r') {
            // The rest of the line in one append: byte-at-a-time is the
            // relay's hot loop otherwise.
            size_t end = i + 1;
            while (end < bytes.size() && bytes[end] != '\n' && bytes[end] != '\r') ++end;
            const std::string_view run = bytes.substr(i, end - i);
            if (overflowed_) {
                if (filtering) forward->append(run);
            } else {
                event_.append(run);
            }
            line_bytes_ += run.size();
            i = end;
        } else {
            if (overflowed_) {
                if (filtering) forward->push_back(c);
            } else {
                event_.push_back(c);
            }
            ++i;
            pending_cr_ = c == '\r';
            if (line_bytes_ == 0) {
                // Blank line: the event ends here.
                cr_ended_event_ = c == '\r';
                last_dropped_ = false;
                if (overflowed_) {
                    overflowed_ = false;
                } else {
                    const bool drop = onEvent(event_, filtering);
                    if (filtering && !drop) forward->append(event_);
                    last_dropped_ = drop;
                    event_.clear();
                }
            }
            line_bytes_ = 0;
        }
        if (!overflowed_ && event_.size() > max_event_bytes_) {
            // Too large to hold: pass it through unparsed until its end.
            if (filtering) forward->append(event_);
            event_.clear();
            overflowed_ = true;
        }
    }
}

void SseUsageParser::finish(std::string* forward) {
    if (!event_.empty() && !overflowed_) {
        onEvent(event_, false);  // count its usage, but never drop an unterminated event
        if (forward) forward->append(event_);
    }
    event_.clear();
    line_bytes_ = 0;
    pending_cr_ = false;
    cr_ended_event_ = false;
    overflowed_ = false;
}

}  // namespace dpgate::bench::legacy
