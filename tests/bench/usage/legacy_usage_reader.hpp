// A usage reader of another design, usage_reader_bench's peer (see
// legacy_usage_reader.cpp). Same API as gateway/usage/stream_usage.hpp.
#pragma once

#include "gateway/usage/stream_usage.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dpgate::bench::legacy {

using gateway::Usage;

std::optional<Usage> parseUsageJson(std::string_view json) noexcept;
bool isUsageOnlyChunk(std::string_view json) noexcept;
std::string sseEventData(std::string_view event);

class SseUsageParser {
public:
    static constexpr size_t kDefaultMaxEventBytes = 1 << 20;

    explicit SseUsageParser(size_t max_event_bytes = kDefaultMaxEventBytes) : max_event_bytes_(max_event_bytes) {}

    void observe(std::string_view bytes);
    void filter(std::string_view bytes, std::string& forward);
    void finish(std::string* forward = nullptr);

    // The last usage seen (the final chunk's, normally).
    const std::optional<Usage>& usage() const { return usage_; }
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
    std::string event_;            // current event's raw bytes, terminators included
    size_t line_bytes_ = 0;        // bytes in the current line before its terminator
    bool pending_cr_ = false;      // last byte was CR: a following LF is part of it
    bool overflowed_ = false;      // current event exceeded the cap: pass it through
    bool cr_ended_event_ = false;  // that CR was the blank line ending an event
    bool last_dropped_ = false;    // the event that just ended was dropped (its CRLF's LF too)
    std::optional<Usage> usage_;
    bool saw_usage_only_ = false;
    bool saw_done_ = false;
    size_t dropped_events_ = 0;
};

}  // namespace dpgate::bench::legacy
