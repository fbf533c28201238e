// Reads OpenAI-style `usage` from upstream responses so tokens can be
// counted per slot: from a whole non-stream JSON body, or incrementally from
// an SSE stream fed in arbitrary chunks, cutting out of the stream the
// usage-only chunk dpgate itself asked for. Beside the relay because it
// changes what the client receives; pure (bytes in, facts out, no Asio) so
// unit tests and the fuzz build link it alone (dpgate_stream_usage). Never
// throws on input: malformed JSON or framing just yields no usage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpgate::gateway {

struct Usage {
    uint64_t prompt_tokens = 0;
    uint64_t completion_tokens = 0;
    uint64_t cached_prompt_tokens = 0;  // prompt_tokens_details.cached_tokens; 0 when absent
    bool operator==(const Usage&) const = default;
};

// The counts of a usage object as the backend wrote them, before they are
// judged: each unset when absent or null.
struct UsageCounts {
    std::optional<uint64_t> prompt, completion, cached, total;
    // Which of them held a value no count can be (negative, a fraction,
    // beyond 64 bits, text, true, an object), as its last value: it reads
    // as absent.
    enum Field : uint8_t { kPrompt = 1, kCompletion = 2, kCached = 4, kTotal = 8 };
    uint8_t non_counts = 0;
};

// A backend's usage feeds counters, routing and count checks; one it cannot
// have meant must feed none of them: a value that is not a count, a count
// over `max_tokens` (the caller's bound for the request: the window times
// its sequences), or cached_tokens over prompt_tokens. The readers below
// still return such a usage as read (a non-count as absent), and set
// `*implausible` (when given; it is never cleared) for the caller to ignore
// it.
struct UsageCheck {
    uint64_t max_tokens = UINT64_MAX;
    bool* implausible = nullptr;
};

bool implausible(const UsageCounts& counts, uint64_t max_tokens) noexcept;

// The usage in `counts`: none without prompt_tokens or completion_tokens.
std::optional<Usage> usageOf(const UsageCounts& counts, const UsageCheck& check = {}) noexcept;

// The `usage` object of a non-stream answer. Present when the top-level
// `usage` is an object holding prompt_tokens or completion_tokens as
// non-negative integers, checked as UsageCheck says; a missing field
// reads as 0. A repeated key counts its last value, as a DOM parse does. The
// usage object is checked as strictly as a DOM parse. The answer is walked
// backward from its end to its last top-level `usage` member: the members
// after it are passed over (their strings and brackets matched, nothing
// more), the text before it is not read at all, as the answer's text is not
// ours to check. An answer whose end the walk cannot take apart is read
// whole (readWholeUsage).
std::optional<Usage> parseUsageJson(std::string_view json, const UsageCheck& check = {}) noexcept;

// The usage of an answer of which only the end is at hand (the relay keeps
// the last 64 KiB of an answer over 1 MiB): the walk from the end alone,
// none when it does not reach the usage member within `end`. A window that
// starts inside a string or a container fails the walk there, so a usage
// found is the answer's own.
std::optional<Usage> parseUsageJsonEnd(std::string_view end, const UsageCheck& check = {}) noexcept;

// The same facts from a read of the whole document by simdjson On Demand,
// which checks the rest of it only as far as On Demand reads it (UTF-8,
// control characters, one whole object). For valid JSON, the same answer as
// parseUsageJson (the usage fuzz target holds the two to it).
std::optional<Usage> readWholeUsage(std::string_view json, const UsageCheck& check = {}) noexcept;

// True for the extra chunk `stream_options.include_usage` adds at the end:
// `"choices": []` together with a `usage` object, plausible or not.
bool isUsageOnlyChunk(std::string_view json) noexcept;

// The data of one SSE event (its `data:` lines joined by '\n', one leading
// space after the colon removed), given the event's raw bytes.
std::string sseEventData(std::string_view event);

// Incremental SSE scanner. Events end at a blank line (LF, CRLF or CR line
// endings, split anywhere across feed() calls). Memory is bounded: at most
// one event is held, and an event larger than max_event_bytes is passed on
// unparsed.
//
// Two modes, chosen per stream:
//   observe(bytes)          accounting only; the caller forwards its own bytes.
//   filter(bytes, forward)  appends to `forward` the bytes the client should
//                           see: the input minus the usage-only event. For
//                           streams where dpgate itself asked upstream for
//                           include_usage. Bytes of an unfinished event are
//                           held until it ends (or grows past the cap).
// Call finish() at end of stream: it releases a trailing unterminated event
// (forwarded verbatim in filter mode, never dropped). When the stream broke
// off instead, brokeOff() drops it.
class SseUsageParser {
public:
    static constexpr size_t kDefaultMaxEventBytes = 1 << 20;

    // `max_tokens`: as UsageCheck's.
    explicit SseUsageParser(size_t max_event_bytes = kDefaultMaxEventBytes, uint64_t max_tokens = UINT64_MAX)
        : max_event_bytes_(max_event_bytes), max_tokens_(max_tokens) {}

    void observe(std::string_view bytes);
    void filter(std::string_view bytes, std::string& forward);
    void finish(std::string* forward = nullptr);
    // The stream broke off: an unfinished event is dropped, not released, as
    // an SSE client drops an event its stream ends inside (the HTML
    // standard's event stream interpretation). Returns whether some of it
    // already went to the client (all of it in observe mode; the start of an
    // event over the cap in filter mode), so that the caller can end it
    // before an event of its own.
    bool brokeOff();

    // The last usage seen (the final chunk's, normally).
    const std::optional<Usage>& usage() const { return usage_; }
    // The last usage object seen with a count (or a value that should have
    // been one) is implausible (UsageCheck): usage() must then be ignored.
    bool implausibleUsage() const { return implausible_; }
    // Whether a usage-only event was seen / removed from the forwarded bytes.
    bool sawUsageOnlyChunk() const { return saw_usage_only_; }
    size_t droppedEvents() const { return dropped_events_; }
    // True after data: [DONE].
    bool sawDone() const { return saw_done_; }
    // Bytes currently held (for tests of the memory bound).
    size_t heldBytes() const { return event_.size(); }

private:
    void feed(std::string_view bytes, std::string* forward);
    // Returns true if the event is to be dropped from the forwarded stream.
    bool onEvent(std::string_view event, bool filtering);

    size_t max_event_bytes_;
    uint64_t max_tokens_;
    std::string event_;            // current event's raw bytes, terminators included
    size_t line_bytes_ = 0;        // bytes in the current line before its terminator
    bool pending_cr_ = false;      // last byte was CR: a following LF is part of it
    bool overflowed_ = false;      // current event exceeded the cap: pass it through
    bool cr_ended_event_ = false;  // that CR was the blank line ending an event
    bool last_dropped_ = false;    // the event that just ended was dropped (its CRLF's LF too)
    bool filtering_ = false;       // filter() was called: the caller forwards only what it hands back
    std::optional<Usage> usage_;
    bool implausible_ = false;
    bool saw_usage_only_ = false;
    bool saw_done_ = false;
    size_t dropped_events_ = 0;
};

}  // namespace dpgate::gateway
