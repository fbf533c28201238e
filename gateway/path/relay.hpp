// The transport of one proxied request: the request's bytes to a leased
// (backend, rank), the answer's bytes back to the client as they arrive.
// Deciding where it goes, retrying and accounting are the request path's
// (request_path.hpp); the Relay is the UpstreamConnector it tries through.
//
// Streaming responses go chunk by chunk: a piece read from upstream is
// written to the client before the next piece is read, through one bounded
// buffer, so a slow client slows the upstream read (backpressure) instead of
// growing memory. A client that goes away closes the upstream connection,
// which is how the backend learns to stop generating.
#pragma once

#include "admission/verdict.hpp"
#include "gateway/backends/upstream_pool.hpp"
#include "gateway/http/upstream_response_parser.hpp"
#include "gateway/path/request_context.hpp"
#include "gateway/path/upstream_connector.hpp"

#include <array>
#include <memory>
#include <string>

namespace dpgate::gateway {

class ResponseFraming;
class SseUsageParser;

class Relay final : public UpstreamConnector {
public:
    // `stream_usage_added`: dpgate asks upstream for the usage chunk
    // (stream_options.include_usage) and cuts it out of what the client sees.
    Relay(RequestContext& context, const admission::Admitted& admitted, bool stream_usage_added);
    ~Relay() override;

    // From now until the relay ends, a client that hangs up (EOF or reset)
    // closes the upstream connection at once, even during a prefill that
    // has not produced a byte yet. Costs a coroutine and an epoll re-arm.
    void watchClient();

    awaitable<UpstreamAnswer> send(const SlotLease& slot) override;

    // The answer the last send() got from `slot`, relayed to the client. The
    // slot's prefill is over at the first body byte (or at the answer of a
    // non-stream); the record learns route, status, bytes, timings and
    // usage. Returns whether the client connection may serve another request.
    awaitable<bool> relayAnswer(SlotLease& slot);
    // The client's answer for a try that got none (failed or timed out).
    awaitable<bool> answerFailure(const SlotLease& slot, const UpstreamAnswer& answer);

private:
    struct ClientWatch;
    enum class Attempt { ok, retry_fresh, failed };
    using Parser = UpstreamResponseParser;

    // Serializes the upstream request head into upstream_head_ and points
    // upstream_buffers_ at it and the body (with the splice admission and
    // dpgate insert after the body's '{'): the body is never copied.
    void buildUpstreamRequest(size_t backend, uint32_t rank);
    // A backend's error answer (>= 400, not a stream): read whole (it is
    // small) and sent in OpenAI's error shape.
    awaitable<bool> relayErrorAnswer(SlotLease& slot);
    // The next piece of an upstream body into the parser's body buffer: what
    // connection.buffer already holds first, a read only when that gave no
    // body byte. need_buffer (the piece filled the buffer) is not an error.
    awaitable<error_code> readBodyPiece(UpstreamConnection& connection, Parser& parser);
    // The record's time to first byte, when it has none yet.
    void firstByteSent();
    // The client's answer head for `parser`'s answer from backend_name/rank.
    void startFraming(ResponseFraming& framing, const Parser& parser, const std::string& backend_name,
                      uint32_t rank) const;
    // The upstream broke off an answer with `error`, after every whole
    // piece before it went out: a client that got nothing yet gets a gateway
    // error, a chunked event stream ends in an error event (the unfinished
    // event `events` holds, if any, dropped), and the connection closes. A
    // coroutine of its own, so that relayAnswer's frame stays small.
    awaitable<void> answerBrokeOff(error_code error, const std::string& backend_name, ResponseFraming& framing,
                                   bool sse_chunked, SseUsageParser* events);
    // Gives the connection back to the pool when it can serve another
    // request, and holds nothing past the answer.
    void releaseConnection(size_t backend, bool whole);
    // Counts `n` connections to `backend` closed for `reason` (dpgate_upstream_connections_dropped_total).
    void countDropped(size_t backend, const char* reason, uint32_t n) const;
    // The most any count of this request's usage can plausibly be: the
    // configured window (the public window never exceeds it, and may have
    // moved since admission) times the request's sequences.
    uint64_t maxUsageTokens() const;
    static awaitable<void> watch(std::shared_ptr<ClientSession> session, std::shared_ptr<ClientWatch> watch);

    RequestContext& c_;
    const admission::Admitted& admitted_;
    const bool stream_usage_added_;
    std::shared_ptr<ClientWatch> watch_;
    std::unique_ptr<UpstreamConnection> connection_;  // the last try's, with its answer, while it has one
    std::string upstream_head_;
    std::string splice_;  // spliced after the body's '{': max_tokens and/or stream_options
    std::array<net::const_buffer, 4> upstream_buffers_;
};

}  // namespace dpgate::gateway
