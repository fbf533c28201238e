#include "gateway/metrics/usage_parser.hpp"

#include <nlohmann/json.hpp>

namespace dpgate::metrics {
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
    if (details != it->end() && details->is_object()) u.cached_prompt_tokens = tokenCount(*details, "cached_tokens").value_or(0);
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
        char c = json[i];
        if (c == '"') {
            size_t start = ++i;
            while (i < n && json[i] != '"') i += json[i] == '\\' ? 2 : 1;
            if (i >= n) return {};
            std::string_view token = json.substr(start, i - start);
            ++i;
            if (depth != 1 || token != key) continue;
            while (i < n && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) ++i;
            if (i >= n || json[i] != ':') continue;  // a string value, not a key
            ++i;
            while (i < n && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) ++i;
            size_t value_start = i;
            int value_depth = 0;
            for (; i < n; ++i) {
                char v = json[i];
                if (v == '"') {
                    ++i;
                    while (i < n && json[i] != '"') i += json[i] == '\\' ? 2 : 1;
                } else if (v == '{' || v == '[') {
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

}  // namespace

std::optional<Usage> parseUsageJson(std::string_view json) noexcept {
    try {
        std::string_view usage = topLevelValue(json, "usage");
        if (!usage.empty() && usage.front() == '{') {
            auto object = parseObject(usage);
            if (!object) return std::nullopt;
            Json doc = Json::object();
            doc["usage"] = std::move(*object);
            return usageOf(doc);
        }
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

}  // namespace dpgate::metrics
