// What the answer's body teaches on its way to the client: the backend's
// usage, read from a stream's events (observed, or filtered when dpgate
// asked for the usage chunk itself and cuts it out of what the client
// sees) or from a JSON answer (read where it lies when it came in one
// piece; past 1 MiB only its end is kept, where the usage is).
#pragma once

#include "gateway/usage/stream_usage.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpgate::gateway {

class UsageTap {
public:
    enum class Mode {
        json,     // a whole JSON answer
        observe,  // an event stream the client gets as it is
        filter,   // an event stream without the usage chunk dpgate asked for
    };
    // `max_usage_tokens`: the most any count of this answer's usage can
    // plausibly be (UsageCheck).
    UsageTap(Mode mode, uint64_t max_usage_tokens);

    Mode mode() const { return mode_; }
    // A piece of the body on its way to the client; returns what the client
    // gets of it (in filter mode, maybe nothing: an unfinished event is held
    // back). `first` and `last`: the body's first and last piece.
    std::string_view pass(std::string_view piece, bool first, bool last);
    // What a filtered stream still holds back when the body ends.
    std::string_view finish();
    // The stream broke off (SseUsageParser::brokeOff): whether an event
    // had begun to reach the client.
    bool brokeOff() { return mode_ != Mode::json && events_.brokeOff(); }
    // The answer's usage; none when absent or implausible (`implausible`
    // then says so, for the caller to count).
    std::optional<Usage> usage(bool& implausible);

private:
    const Mode mode_;
    const uint64_t max_usage_tokens_;
    SseUsageParser events_;
    std::string filtered_;
    std::string answer_copy_;
    bool copy_cut_ = false;          // answer_copy_ holds only the answer's end
    std::string_view whole_answer_;  // a body that came in one piece, where it lies
};

}  // namespace dpgate::gateway
