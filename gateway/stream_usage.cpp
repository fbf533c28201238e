#include "gateway/stream_usage.hpp"

#include <simdjson.h>

#include <cstring>
#include <memory>

namespace dpgate::gateway {
namespace {

namespace od = simdjson::ondemand;

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

// What one JSON document says: its usage, and whether it is the usage-only
// chunk. Read by simdjson On Demand (issue 15: one JSON reader beside
// admission's, docs/BENCHMARKS.md "Usage reader" has the figures), with no
// pre-check for a usage key: a vLLM answer always carries one, so the
// memmem that looked for it never spared a parse (issue 18, ninth round).
struct UsageFacts {
    std::optional<Usage> usage;
    bool empty_choices = false;  // "choices": []
};

// The usage object's members nest a few levels at most; deeper is refused
// rather than recursed into.
constexpr int kMaxDepth = 64;

// Every value inside the usage object is checked as a DOM parse would
// (escapes, literals, number grammar), so a malformed usage counts nothing.
bool wellFormed(od::value value, int depth) {
    od::json_type type;
    if (value.type().get(type)) return false;
    switch (type) {
        case od::json_type::object: {
            od::object object;
            if (depth > kMaxDepth || value.get_object().get(object)) return false;
            for (auto field : object) {
                std::string_view key;
                od::value member;
                if (field.unescaped_key().get(key) || field.value().get(member) || !wellFormed(member, depth + 1))
                    return false;
            }
            return true;
        }
        case od::json_type::array: {
            od::array array;
            if (depth > kMaxDepth || value.get_array().get(array)) return false;
            for (auto element : array) {
                od::value item;
                if (element.get(item) || !wellFormed(item, depth + 1)) return false;
            }
            return true;
        }
        case od::json_type::number: {
            // get_number() refuses integers beyond 64 bits, which JSON allows
            // (a DOM parse reads them as doubles): get_double() takes those.
            od::number number;
            double as_double;
            return !value.get_number().get(number) || !value.get_double().get(as_double);
        }
        case od::json_type::string: {
            std::string_view text;
            return !value.get_string().get(text);
        }
        case od::json_type::boolean: {
            bool flag;
            return !value.get_bool().get(flag);
        }
        case od::json_type::null: {
            bool is_null = false;
            return !value.is_null().get(is_null) && is_null;
        }
    }
    return false;
}

// A token count: a non-negative integer that fits in 64 bits. Any other
// well-formed value leaves it unset; false when the value is malformed.
bool tokenCount(od::value value, std::optional<uint64_t>& out) {
    out.reset();
    od::json_type type;
    if (value.type().get(type)) return false;
    if (type != od::json_type::number) return wellFormed(value, 2);
    od::number number;
    if (value.get_number().get(number)) {
        double as_double;
        return !value.get_double().get(as_double);  // beyond 64 bits: valid JSON, not a count
    }
    if (number.is_uint64()) {
        out = number.get_uint64();
    } else if (number.is_int64() && number.get_int64() >= 0) {
        out = uint64_t(number.get_int64());  // -0 is an integer zero
    }
    return true;
}

// The usage object; nullopt when it holds no count or is malformed.
std::optional<Usage> readUsage(od::value value) {
    od::object object;
    if (value.get_object().get(object)) return std::nullopt;
    std::optional<uint64_t> prompt, completion, cached;
    for (auto field : object) {
        std::string_view key;
        od::value member;
        if (field.unescaped_key().get(key) || field.value().get(member)) return std::nullopt;
        bool ok = true;
        if (key == "prompt_tokens") {
            ok = tokenCount(member, prompt);
        } else if (key == "completion_tokens") {
            ok = tokenCount(member, completion);
        } else if (key == "prompt_tokens_details") {
            cached.reset();  // the last one counts, whatever it is
            od::object details;
            od::json_type type;
            if (member.type().get(type)) return std::nullopt;
            if (type != od::json_type::object) {
                ok = wellFormed(member, 1);
            } else if (member.get_object().get(details)) {
                return std::nullopt;
            } else {
                for (auto inner : details) {
                    std::string_view inner_key;
                    od::value inner_value;
                    if (inner.unescaped_key().get(inner_key) || inner.value().get(inner_value)) return std::nullopt;
                    ok = inner_key == "cached_tokens" ? tokenCount(inner_value, cached) : wellFormed(inner_value, 2);
                    if (!ok) break;
                }
            }
        } else {
            ok = wellFormed(member, 1);
        }
        if (!ok) return std::nullopt;
    }
    if (!prompt && !completion) return std::nullopt;
    return Usage{.prompt_tokens = prompt.value_or(0),
                 .completion_tokens = completion.value_or(0),
                 .cached_prompt_tokens = cached.value_or(0)};
}

// The top-level members `usage` and `choices` of a document. The key
// `usage` is matched as written (onlyNullUsage looks for those bytes);
// other members are skipped, not validated. Nullopt when the document is
// not one whole object.
std::optional<UsageFacts> readFacts(od::document& doc) {
    od::object root;
    if (doc.get_object().get(root)) return std::nullopt;
    UsageFacts facts;
    for (auto field : root) {
        od::raw_json_string key;
        od::value value;
        if (field.key().get(key) || field.value().get(value)) return std::nullopt;
        if (key == "usage") {
            facts.usage = readUsage(value);
        } else if (key == "choices") {
            od::json_type type;
            od::array choices;
            bool empty = false;
            facts.empty_choices = !value.type().get(type) && type == od::json_type::array &&
                                  !value.get_array().get(choices) && !choices.is_empty().get(empty) && empty;
        }
    }
    // Anything after the root object (a second document, a cut one) makes
    // the whole text malformed.
    const char* trailing = nullptr;
    if (doc.current_location().get(trailing) == simdjson::SUCCESS) return std::nullopt;
    return facts;
}

// One parser per thread, reused (a relay runs on one worker thread), and a
// copy of the input with the padding simdjson reads past its end: callers
// hand over string_views without it.
class FactsReader {
public:
    std::optional<UsageFacts> read(std::string_view json) {
        // An answer can be up to the relay's 1 MiB copy; do not keep that
        // much per thread after one large answer.
        constexpr size_t kShrinkAboveBytes = 256 << 10;
        const size_t needed = json.size() + simdjson::SIMDJSON_PADDING;
        if (copy_bytes_ < needed || (copy_bytes_ > kShrinkAboveBytes && copy_bytes_ > 4 * needed)) {
            copy_ = std::make_unique<char[]>(needed);
            copy_bytes_ = needed;
        }
        if (parser_.capacity() > kShrinkAboveBytes && parser_.capacity() > 4 * json.size()) parser_ = od::parser{};
        std::memcpy(copy_.get(), json.data(), json.size());
        std::memset(copy_.get() + json.size(), 0, simdjson::SIMDJSON_PADDING);
        od::document doc;
        if (parser_.iterate(copy_.get(), json.size(), copy_bytes_).get(doc)) return std::nullopt;
        return readFacts(doc);
    }

private:
    od::parser parser_;
    std::unique_ptr<char[]> copy_;
    size_t copy_bytes_ = 0;
};

std::optional<UsageFacts> usageFacts(std::string_view json) noexcept {
    try {
        thread_local FactsReader reader;
        return reader.read(json);
    } catch (...) {  // bad_alloc: no usage rather than a dropped request
        return std::nullopt;
    }
}

}  // namespace

std::optional<Usage> parseUsageJson(std::string_view json) noexcept {
    auto facts = usageFacts(json);
    return facts ? facts->usage : std::nullopt;
}

bool isUsageOnlyChunk(std::string_view json) noexcept {
    auto facts = usageFacts(json);
    return facts && facts->empty_choices && facts->usage;
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
    auto facts = usageFacts(data);
    if (!facts) return false;
    if (facts->usage) usage_ = facts->usage;
    if (facts->usage && facts->empty_choices) {
        saw_usage_only_ = true;
        if (filtering) {
            ++dropped_events_;
            return true;
        }
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

}  // namespace dpgate::gateway
