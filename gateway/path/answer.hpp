// How a request's answer ends, each in one place:
//
//   answerEnds()      the key's slot goes back just before the answer's last
//                     bytes are written: a client that sends its next request
//                     the moment it has the answer must find its slot free
//   completeAnswer()  what the answer was goes into the access record
//   writeAnswer()     a complete small answer (local, refused, a backend's
//                     error) written through the client connection
//   refuse()          an error in OpenAI's shape, through writeAnswer()
#pragma once

#include "common/api_error.hpp"
#include "gateway/net/net.hpp"
#include "gateway/path/request_context.hpp"
#include "gateway/platform/cycle_clock.hpp"
#include "gateway/usage/stream_usage.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace dpgate::gateway {

// What an answer was, as the access record keeps it.
struct AnswerOutcome {
    std::string_view backend;  // the route, for a relayed answer (a name of the config in force)
    int rank = -1;
    unsigned status = 0;  // as written to the client; 0: the client left before the head went out
    uint64_t bytes_out = 0;
    // When its first byte went out; unset when none did.
    std::optional<CycleClock::time_point> first_byte_at;
    const char* stream_abort = nullptr;  // "client" | "upstream": who cut a relayed answer short
    std::string rejection;               // the error code the client was told, or why the answer broke
    std::optional<Usage> usage;          // the backend's, when plausible
};

// Returns the request's key slot to its limiter (KeyLease). Idempotent.
void answerEnds(RequestContext& c) noexcept;

// Puts `outcome` into the request's access record.
void completeAnswer(RequestContext& c, const AnswerOutcome& outcome);

// Writes `response` (a complete answer) to the client, ends the answer and
// completes it: `outcome` as far as the caller knows it (a route, an error
// code), with the status and bytes written. Returns whether the write went
// through; response.keep_alive() tells whether the connection may stay.
awaitable<bool> writeAnswer(RequestContext& c, http::response<http::string_body>& response, AnswerOutcome& outcome);

// An answer relayed piece by piece: its outcome grows as the pieces go out
// and is completed once, when the relay ends however it ends (an exception
// included), unless the relay wrote a complete answer of its own instead
// (answerWith).
class RelayedAnswer {
public:
    explicit RelayedAnswer(RequestContext& c) : c_(c) {}
    RelayedAnswer(const RelayedAnswer&) = delete;
    RelayedAnswer& operator=(const RelayedAnswer&) = delete;
    ~RelayedAnswer() {
        if (!handed_over_) completeAnswer(c_, outcome_);
    }

    AnswerOutcome& outcome() { return outcome_; }
    // `bytes` of the body went out.
    void sent(size_t bytes) { outcome_.bytes_out += bytes; }
    // The first byte went out now, unless one did before.
    void firstByte() {
        if (!outcome_.first_byte_at) outcome_.first_byte_at = CycleClock::now();
    }
    // `response` is the whole answer after all (writeAnswer).
    awaitable<bool> answerWith(http::response<http::string_body>& response);

private:
    RequestContext& c_;
    AnswerOutcome outcome_;
    bool handed_over_ = false;
};

// An error in OpenAI's shape as a response to the request (its id, and one
// extra header when `extra` is given).
http::response<http::string_body> errorResponse(const RequestContext& c, const ApiError& error, bool keep_alive,
                                                http::field extra = http::field::unknown,
                                                std::string_view extra_value = {});

// The error as an answer with the request's id (and one extra header when
// `extra` is given), its code in the access record. Returns written &&
// keep_alive.
awaitable<bool> refuse(RequestContext& c, const ApiError& error, bool keep_alive,
                       http::field extra = http::field::unknown, std::string_view extra_value = {});

}  // namespace dpgate::gateway
