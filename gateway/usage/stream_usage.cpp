#include "gateway/usage/stream_usage.hpp"

#include <simdjson.h>

#include <array>
#include <cstring>
#include <memory>
#include <utility>

#include "common/fast_paths.hpp"
#include "gateway/usage/stream_usage_sse2.hpp"
#include "gateway/usage/written_usage.hpp"

namespace dpgate::gateway {
namespace {

namespace od = simdjson::ondemand;

// Where `needle` (two bytes or more) first occurs in `text` from `from` on,
// or npos. With the fast path stream_usage_sse2, sixteen candidate starts
// at a time (stream_usage_sse2.hpp); each candidate is compared whole.
size_t findIn(std::string_view text, std::string_view needle, size_t from = 0) {
    const size_t n = needle.size();
    if (n < 2 || from > text.size() || text.size() - from < n) return std::string_view::npos;
    const size_t last = text.size() - n;  // the last position a match can start
    size_t i = from;
    if (fastPathOn(FastPath::stream_usage_sse2)) {
        if (const size_t at = findInSse2(text, needle, i, last); at != std::string_view::npos) return at;
    }
    for (; i <= last; ++i)
        if (text[i] == needle[0] && text[i + 1] == needle[1] &&
            std::memcmp(text.data() + i + 2, needle.data() + 2, n - 2) == 0)
            return i;
    return std::string_view::npos;
}

// The end of the line that starts at `from`: the first CR or LF at or after
// it, or the text's end. With stream_usage_sse2, sixteen bytes at a time:
// an event's data line is hundreds of bytes, and this runs over every byte
// a stream relays.
size_t lineEnd(std::string_view text, size_t from) {
    size_t i = fastPathOn(FastPath::stream_usage_sse2) ? lineEndSse2(text, from) : from;
    while (i < text.size() && text[i] != '\n' && text[i] != '\r') ++i;
    return i;
}

// True when every `"usage"` key in the raw event is `"usage":null` on the
// same line: the token chunks of an include_usage stream, skipped without
// extracting their data.
bool onlyNullUsage(std::string_view event) {
    constexpr std::string_view key = "\"usage\"";
    for (size_t pos = findIn(event, key); pos != std::string_view::npos; pos = findIn(event, key, pos + 1)) {
        size_t i = pos + key.size();
        while (i < event.size() && (event[i] == ' ' || event[i] == '\t')) ++i;
        if (i >= event.size() || event[i] != ':') return false;
        ++i;
        while (i < event.size() && (event[i] == ' ' || event[i] == '\t')) ++i;
        if (event.substr(i, 4) != "null") return false;
    }
    return true;
}

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

// A token count: a non-negative integer that fits in 64 bits, or null
// (unset). Any other well-formed value leaves it unset and marks the counts
// `field` a non-count; false when the value is malformed.
bool tokenCount(od::value value, std::optional<uint64_t>& out, UsageCounts& counts, uint8_t field) {
    out.reset();
    counts.non_counts &= uint8_t(~field);
    od::json_type type;
    if (value.type().get(type)) return false;
    if (type == od::json_type::null) return wellFormed(value, 2);
    if (type != od::json_type::number) {
        counts.non_counts |= field;
        return wellFormed(value, 2);
    }
    od::number number;
    if (value.get_number().get(number)) {
        double as_double;
        counts.non_counts |= field;  // beyond 64 bits: valid JSON, not a count
        return !value.get_double().get(as_double);
    }
    if (number.is_uint64()) {
        out = number.get_uint64();
    } else if (number.is_int64() && number.get_int64() >= 0) {
        out = uint64_t(number.get_int64());  // -0 is an integer zero
    } else {
        counts.non_counts |= field;  // negative, or a fraction
    }
    return true;
}

// The usage object's counts; nullopt when it is malformed. A repeated key
// counts its last value.
std::optional<UsageCounts> readUsage(od::value value) {
    od::object object;
    if (value.get_object().get(object)) return std::nullopt;
    UsageCounts counts;
    std::optional<uint64_t>& cached = counts.cached;
    for (auto field : object) {
        std::string_view key;
        od::value member;
        if (field.unescaped_key().get(key) || field.value().get(member)) return std::nullopt;
        bool ok = true;
        if (key == "prompt_tokens") {
            ok = tokenCount(member, counts.prompt, counts, UsageCounts::kPrompt);
        } else if (key == "completion_tokens") {
            ok = tokenCount(member, counts.completion, counts, UsageCounts::kCompletion);
        } else if (key == "total_tokens") {
            ok = tokenCount(member, counts.total, counts, UsageCounts::kTotal);
        } else if (key == "prompt_tokens_details") {
            cached.reset();  // the last one counts, whatever it is
            counts.non_counts &= uint8_t(~UsageCounts::kCached);
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
                    ok = inner_key == "cached_tokens" ? tokenCount(inner_value, cached, counts, UsageCounts::kCached)
                                                      : wellFormed(inner_value, 2);
                    if (!ok) break;
                }
            }
        } else {
            ok = wellFormed(member, 1);
        }
        if (!ok) return std::nullopt;
    }
    return counts;
}

bool isJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The one reader of a usage object: its counts, nullopt when it is
// malformed; a repeated key counts its last value. `text` begins with the
// object; `alone`: it holds nothing else but whitespace (the tail walk's
// cut), rather than the rest of a document after the object. The shape
// backends write is read from the text (readWrittenUsage, the fast path
// written_usage); any other spelling, and every one with the fast path off,
// by `on_demand()`, which reads the same object by simdjson On Demand
// (readUsage) and is called only then.
template <typename OnDemand>
std::optional<UsageCounts> readUsageObject(std::string_view text, bool alone, OnDemand&& on_demand) {
    if (UsageCounts counts; fastPathOn(FastPath::written_usage) && readWrittenUsage(text, alone, counts)) return counts;
    return on_demand();
}

// Whether the document's text ends where its value did: anything after it
// (a second document, a cut one) makes the whole text malformed.
bool endsThere(od::document& doc) {
    const char* trailing = nullptr;
    return doc.current_location().get(trailing) != simdjson::SUCCESS;
}

// What one JSON document says: its usage, and whether it is the usage-only
// chunk. Read by simdjson On Demand, with no pre-check for a usage key: a
// vLLM answer always carries one, so a search for it would never spare a
// parse.
struct UsageFacts {
    std::optional<UsageCounts> usage;  // none when absent or malformed
    bool empty_choices = false;        // "choices": []
};

// How readFacts reads the usage object: by readUsageObject, or by On Demand
// alone (readWholeUsage: the twin that the tests and the fuzz target hold
// the plain reader to).
enum class UsageRead { plain_first, on_demand };

// The top-level members `usage` and `choices` of the document `json`. The
// key `usage` is matched as written (onlyNullUsage looks for those bytes);
// other members are skipped, not validated. Nullopt when the document is
// not one whole object.
template <UsageRead how>
std::optional<UsageFacts> readFacts(od::document& doc, std::string_view json) {
    od::object root;
    if (doc.get_object().get(root)) return std::nullopt;
    UsageFacts facts;
    for (auto field : root) {
        od::raw_json_string key;
        od::value value;
        if (field.key().get(key) || field.value().get(value)) return std::nullopt;
        if (key == "usage") {
            const auto on_demand = [&value] { return readUsage(value); };
            if constexpr (how == UsageRead::on_demand) {
                facts.usage = on_demand();
            } else {
                // The object's text runs on to the document's end; what the
                // plain reader read, On Demand skips as a value left unread.
                const auto start = size_t(value.raw_json_token().data() - json.data());
                facts.usage = readUsageObject(json.substr(start), false, on_demand);
            }
        } else if (key == "choices") {
            od::json_type type;
            od::array choices;
            bool empty = false;
            facts.empty_choices = !value.type().get(type) && type == od::json_type::array &&
                                  !value.get_array().get(choices) && !choices.is_empty().get(empty) && empty;
        }
    }
    if (!endsThere(doc)) return std::nullopt;
    return facts;
}

// The usage member's value alone, read as a document of its own (the tail
// walk's cut).
std::optional<UsageCounts> readUsageDocument(od::document& doc) {
    od::value root;
    if (doc.get_value().get(root)) return std::nullopt;
    std::optional<UsageCounts> usage = readUsage(root);
    if (!endsThere(doc)) return std::nullopt;
    return usage;
}

// One parser per thread, reused (a relay runs on one worker thread), and a
// copy of the input with the padding simdjson reads past its end: callers
// hand over string_views without it.
class FactsReader {
public:
    // What `reader(doc, text)` reads from the document `json` (`text`: the
    // copy `doc` reads); nullopt when simdjson cannot index it, or memory
    // runs out (no usage rather than a dropped request).
    template <typename Reader>
    auto read(std::string_view json, Reader reader) noexcept
        -> decltype(reader(std::declval<od::document&>(), std::string_view())) {
        try {
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
            return reader(doc, std::string_view(copy_.get(), json.size()));
        } catch (...) {
            return std::nullopt;
        }
    }

private:
    od::parser parser_;
    std::unique_ptr<char[]> copy_;
    size_t copy_bytes_ = 0;
};

FactsReader& threadReader() {
    thread_local FactsReader reader;
    return reader;
}

template <UsageRead how>
std::optional<UsageFacts> usageFacts(std::string_view json) noexcept {
    return threadReader().read(json, readFacts<how>);
}

// The last top-level member of an answer named `usage`, found by walking
// the answer backward from its end: a backend
// writes usage after the choices, so only the few members after it are
// passed over, where reading the whole answer costs more than anything
// else the relay does for it. The walk reads what it passes over only as
// far as it must to find where each value starts; it never looks at the
// text before the usage member. `unsure` sends the answer to the full
// read: the walk met something it does not take apart (a value that is not
// a string, literal, number, object or array; a member without its colon).
struct TailMember {
    enum class Kind { usage, none, unsure } kind = Kind::unsure;
    std::string_view value;  // the usage member's value, as written
};

class TailWalk {
public:
    explicit TailWalk(std::string_view text) : text_(text), at_(text.size()) {}

    TailMember lastUsage() {
        skipSpace();
        if (!take('}')) return {};
        skipSpace();
        if (take('{')) return atStart() ? TailMember{TailMember::Kind::none, {}} : TailMember{};
        while (true) {
            const size_t value_end = at_;
            if (!skipValue()) return {};
            const std::string_view value = text_.substr(at_, value_end - at_);
            skipSpace();
            if (!take(':')) return {};
            skipSpace();
            const size_t key_end = at_;
            if (!skipString()) return {};
            // The key as written, between its quotes (an escaped spelling is another key).
            const bool usage = text_.substr(at_ + 1, key_end - at_ - 2) == "usage";
            skipSpace();
            if (take(',')) {
                if (usage) return {TailMember::Kind::usage, value};
                skipSpace();
                continue;
            }
            if (take('{') && atStart())
                return usage ? TailMember{TailMember::Kind::usage, value} : TailMember{TailMember::Kind::none, {}};
            return {};
        }
    }

private:
    void skipSpace() {
        while (at_ > 0 && isJsonSpace(text_[at_ - 1])) --at_;
    }
    bool take(char c) {
        if (at_ == 0 || text_[at_ - 1] != c) return false;
        --at_;
        return true;
    }
    bool atStart() {
        skipSpace();
        return at_ == 0;
    }
    // A string that ends before at_: at_ moves to its opening quote. A quote
    // after an odd run of backslashes is inside the string.
    bool skipString() {
        if (!take('"')) return false;
        while (at_ > 0) {
            if (!previousQuote()) return false;
            size_t slashes = 0;
            while (slashes < at_ && text_[at_ - 1 - slashes] == '\\') ++slashes;
            if (slashes % 2 == 0) return true;
        }
        return false;
    }
    // Moves at_ onto the last quote before it; false when there is none.
    // With stream_usage_sse2, sixteen bytes at a time, inline: the strings
    // passed over here are the usage object's keys and the few members
    // after it, a few bytes each, where a call to memrchr cost more than the
    // search.
    bool previousQuote() {
        if (fastPathOn(FastPath::stream_usage_sse2) && previousQuoteSse2(text_, at_)) return true;
        while (at_ > 0)
            if (text_[--at_] == '"') return true;
        return false;
    }
    // An object or array: brackets are counted, strings skipped whole.
    bool skipContainer() {
        static constexpr std::array<bool, 256> kStops = [] {
            std::array<bool, 256> stops{};
            for (unsigned char c : std::string_view("\"{}[]")) stops[c] = true;
            return stops;
        }();
        size_t depth = 0;
        while (at_ > 0) {
            while (at_ > 0 && !kStops[static_cast<unsigned char>(text_[at_ - 1])]) --at_;
            if (at_ == 0) break;
            const char c = text_[at_ - 1];
            if (c == '"') {
                if (!skipString()) return false;
                continue;
            }
            --at_;
            if (c == '}' || c == ']') {
                ++depth;
            } else if (--depth == 0) {
                return true;
            }
        }
        return false;
    }
    bool skipValue() {
        if (at_ == 0) return false;
        const char last = text_[at_ - 1];
        if (last == '"') return skipString();
        if (last == '}' || last == ']') return skipContainer();
        // A number or a literal: what precedes it is checked by the caller.
        const size_t end = at_;
        while (at_ > 0) {
            const char c = text_[at_ - 1];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '.' || c == '+' || c == '-' || c == 'E'))
                break;
            --at_;
        }
        return at_ != end;
    }

    std::string_view text_;
    size_t at_;
};

// The usage member's value the tail walk cut out.
std::optional<UsageCounts> readUsageMember(std::string_view value) noexcept {
    return readUsageObject(value, true, [value] {
        return threadReader().read(value, [](od::document& doc, std::string_view) { return readUsageDocument(doc); });
    });
}

std::optional<Usage> judged(const std::optional<UsageCounts>& counts, const UsageCheck& check) {
    return counts ? usageOf(*counts, check) : std::nullopt;
}

// The usage of the whole document `json`.
template <UsageRead how>
std::optional<Usage> wholeUsage(std::string_view json, const UsageCheck& check) noexcept {
    auto facts = usageFacts<how>(json);
    return facts ? judged(facts->usage, check) : std::nullopt;
}

}  // namespace

bool implausible(const UsageCounts& counts, uint64_t max_tokens) noexcept {
    const uint64_t cached = counts.cached.value_or(0);
    return counts.non_counts != 0 || counts.prompt.value_or(0) > max_tokens ||
           counts.completion.value_or(0) > max_tokens || cached > max_tokens || counts.total.value_or(0) > max_tokens ||
           cached > counts.prompt.value_or(0);
}

std::optional<Usage> usageOf(const UsageCounts& counts, const UsageCheck& check) noexcept {
    if (check.implausible && implausible(counts, check.max_tokens)) *check.implausible = true;
    if (!counts.prompt && !counts.completion) return std::nullopt;
    return Usage{.prompt_tokens = counts.prompt.value_or(0),
                 .completion_tokens = counts.completion.value_or(0),
                 .cached_prompt_tokens = counts.cached.value_or(0)};
}

std::optional<Usage> parseUsageJson(std::string_view json, const UsageCheck& check) noexcept {
    const TailMember tail = TailWalk(json).lastUsage();
    if (tail.kind == TailMember::Kind::none) return std::nullopt;
    if (tail.kind == TailMember::Kind::unsure) return wholeUsage<UsageRead::plain_first>(json, check);
    return judged(readUsageMember(tail.value), check);
}

std::optional<Usage> parseUsageJsonEnd(std::string_view end, const UsageCheck& check) noexcept {
    const TailMember tail = TailWalk(end).lastUsage();
    return tail.kind == TailMember::Kind::usage ? judged(readUsageMember(tail.value), check) : std::nullopt;
}

std::optional<Usage> readWholeUsage(std::string_view json, const UsageCheck& check) noexcept {
    return wholeUsage<UsageRead::on_demand>(json, check);
}

bool isUsageOnlyChunk(std::string_view json) noexcept {
    auto facts = usageFacts<UsageRead::plain_first>(json);
    return facts && facts->empty_choices && facts->usage && usageOf(*facts->usage);
}

std::string sseEventData(std::string_view event) {
    std::string data;
    bool any = false;
    size_t pos = 0;
    while (pos < event.size()) {
        const size_t end = lineEnd(event, pos);
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
        if (findIn(event, "[DONE]") != std::string_view::npos && sseEventData(event) == "[DONE]") saw_done_ = true;
        return false;
    }
    const std::string data = sseEventData(event);
    auto facts = usageFacts<UsageRead::plain_first>(data);
    if (!facts) return false;
    std::optional<Usage> usage;
    if (facts->usage) {
        bool implausible = false;
        usage = usageOf(*facts->usage, {.max_tokens = max_tokens_, .implausible = &implausible});
        if (usage) usage_ = usage;
        if (usage || facts->usage->non_counts != 0) implausible_ = implausible;  // the last usage decides
    }
    if (usage && facts->empty_choices) {
        saw_usage_only_ = true;
        if (filtering) {
            ++dropped_events_;
            return true;
        }
    }
    return false;
}

void SseUsageParser::observe(std::string_view bytes) { feed(bytes, nullptr); }

void SseUsageParser::filter(std::string_view bytes, std::string& forward) {
    filtering_ = true;
    feed(bytes, &forward);
}

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
            const size_t end = lineEnd(bytes, i + 1);
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

bool SseUsageParser::brokeOff() {
    // Observe mode forwards every byte as it comes; filter mode holds an
    // event until its end, but passes one over the cap on as it comes.
    const bool started = overflowed_ || (!filtering_ && !event_.empty());
    event_.clear();
    line_bytes_ = 0;
    pending_cr_ = false;
    cr_ended_event_ = false;
    overflowed_ = false;
    return started;
}

}  // namespace dpgate::gateway
