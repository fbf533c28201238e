#include "gateway/path/body_pump.hpp"

#include "gateway/backends/router.hpp"
#include "gateway/http/parse_buffered.hpp"
#include "gateway/http/response_framing.hpp"
#include "gateway/http/upstream_error.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/metrics/in_flight.hpp"
#include "gateway/net/write_now.hpp"
#include "gateway/path/answer.hpp"
#include "gateway/path/budget_gate.hpp"
#include "gateway/path/client_connection.hpp"
#include "gateway/path/client_watch.hpp"
#include "gateway/path/path_parts.hpp"
#include "gateway/path/upstream_exchange.hpp"
#include "gateway/path/usage_tap.hpp"
#include "gateway/platform/log.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>

#include <charconv>
#include <cstring>

namespace dpgate::gateway {

namespace {

using ClientWrite = WriteNow<ResponseFraming::Buffers>;

// Every write of the pump to the client starts here: the last one ends the
// answer first (answerEnds), so that the key's slot is free when the client
// has the answer.
ClientWrite startWrite(RequestContext& c, tcp::socket* socket, const ResponseFraming::Buffers& buffers, bool last) {
    if (last) answerEnds(c);
    return ClientWrite(socket, buffers);
}

std::string sseErrorEvent(const std::string& message) {
    const ApiError error = ApiError::badGateway(message, "stream_interrupted");
    // The event supplies its own framing: no trailing newline.
    return "data: " + error.json() + "\n\n";
}

// The most any count of this request's usage can plausibly be: the
// configured window (the public window never exceeds it, and may have
// moved since admission) times the request's sequences.
uint64_t maxUsageTokens(const conf::Config& config, uint64_t sequences) {
    uint64_t most = 0;
    if (__builtin_mul_overflow(config.model.window_tokens, sequences, &most)) return UINT64_MAX;
    return most;
}

// The client's answer head for `parser`'s answer from backend_name/rank.
void startFraming(const RequestContext& c, ResponseFraming& framing, const UpstreamResponseParser& parser,
                  const std::string& backend_name, uint32_t rank) {
    const bool no_body = parser.status() == 204 || parser.status() == 304;
    ResponseFraming::Body body = ResponseFraming::Body::chunked;
    uint64_t length = 0;
    if (no_body) {
        body = ResponseFraming::Body::none;
    } else if (!parser.chunked() && parser.content_length()) {
        body = ResponseFraming::Body::length;
        length = *parser.content_length();
    } else if (parser.is_done()) {
        body = ResponseFraming::Body::length;
    }
    char route[160];
    const size_t route_bytes = std::min(backend_name.size(), sizeof route - 16);
    std::memcpy(route, backend_name.data(), route_bytes);
    route[route_bytes] = '/';
    auto [route_end, ec] = std::to_chars(route + route_bytes + 1, route + sizeof route, rank);
    std::string rate_fields;
    if (c.headroom) appendRateLimitFields(rate_fields, *c.headroom);
    framing.start(parser, parser.status(), body, length, c.keep_alive, c.record.request_id,
                  std::string_view(route, size_t(route_end - route)), rate_fields);
}

// A backend's error answer (>= 400, not a stream): read whole (it is small)
// and sent in OpenAI's error shape.
awaitable<bool> relayErrorAnswer(RequestContext& c, UpstreamExchange& exchange, const SlotLease& slot,
                                 const ClientWatch& watch, RelayedAnswer& answer) {
    const std::string& backend_name = slot.backendName();
    UpstreamResponseParser& parser = exchange.answer();
    const unsigned status = parser.status();
    constexpr size_t kMaxErrorBytes = 64 * 1024;
    std::string body;
    char chunk[8192];
    while (!parser.is_done() && body.size() <= kMaxErrorBytes) {
        parser.body().data = chunk;
        parser.body().size = sizeof chunk;
        error_code ec = co_await exchange.readBodyPiece();
        if (ec) {
            if (watch.clientGone()) co_return false;
            ApiError failure = ApiError::badGateway("backend '" + backend_name + "' broke off its " +
                                                        std::to_string(status) + " answer: " + ec.message() + ".",
                                                    "backend_error");
            answer.outcome().rejection = failure.code;
            http::response<http::string_body> response = errorResponse(c, failure, false);
            const bool written = co_await answer.answerWith(response);
            co_return written&& response.keep_alive();
        }
        body.append(chunk, sizeof chunk - parser.body().size);
    }
    const bool whole = parser.is_done();
    http::response<http::string_body> response{http::int_to_status(status), 11};
    response.set(http::field::content_type, "application/json");
    response.set("X-Request-ID", c.record.request_id);
    response.set("X-Dpgate-Route", backend_name + "/" + std::to_string(slot.rank()));
    if (c.headroom) setRateLimitFields(response, *c.headroom);
    if (parser.has(http::field::retry_after)) response.set(http::field::retry_after, parser[http::field::retry_after]);
    response.keep_alive(c.keep_alive);
    response.body() = openAiErrorBody(status, whole ? std::string_view(body) : std::string_view(), backend_name,
                                      &answer.outcome().rejection);
    const bool written = co_await answer.answerWith(response);
    exchange.release(slot.backend(), whole);
    co_return (written && c.keep_alive);
}

// The upstream broke off an answer with `error`, after every whole piece
// before it went out: a client that got nothing yet gets a gateway error, a
// chunked event stream ends in an error event (an unfinished event the tap
// holds dropped), and the connection closes. A coroutine of its own, so
// that pumpAnswer's frame stays small.
awaitable<void> answerBrokeOff(RequestContext& c, error_code error, const std::string& backend_name,
                               ResponseFraming& framing, bool sse_chunked, UsageTap& tap, RelayedAnswer& answer) {
    const conf::LimitsConfig& limits = c.config.limits;
    const bool header_sent = framing.headSent();
    if (header_sent) answer.outcome().stream_abort = "upstream";
    std::string why = error == beast::error::timeout
                          ? "no data for " + std::to_string(limits.stream_idle_timeout_ms) + " ms"
                          : error.message();
    logLine(LogLevel::warn,
            "request " + c.record.request_id + ": upstream " + backend_name + " broke mid-response: " + why);
    if (!header_sent) {
        // Nothing reached the client yet: it gets a clean gateway error.
        ApiError failure = ApiError::badGateway("backend '" + backend_name + "' broke off its response: " + why + ".",
                                                "backend_error");
        answer.outcome().rejection = failure.code;
        http::response<http::string_body> response = errorResponse(c, failure, false);
        co_await answer.answerWith(response);
        co_return;
    }
    answer.outcome().rejection = "stream_interrupted";
    if (sse_chunked) {
        // The client must see a failure, not a stream that merely ends.
        // Every whole event went out before this (pumpAnswer); one the
        // stream broke inside is dropped, as a client drops an event its
        // stream ends inside, unless the client has its start already:
        // then it is ended first, so that the error is an event of its own.
        std::string event;
        if (tap.brokeOff()) event = "\n\n";
        event.append(sseErrorEvent("the upstream stream from backend '" + backend_name +
                                   "' broke before it completed: " + why + "."));
        ClientStream& client = c.connection.stream();
        client.expires_after(ms(limits.client_write_timeout_ms));
        co_await net::async_write(client, framing.next(event, false), use_nothrow);
        answer.sent(event.size());
    }
    c.connection.close();
}

}  // namespace

awaitable<bool> answerNoAnswer(RequestContext& c, const SlotLease& slot, const UpstreamAnswer& answer) {
    const std::string& backend_name = slot.backendName();
    ApiError failure =
        answer.kind == UpstreamAnswer::Kind::timed_out
            ? ApiError::gatewayTimeout("backend '" + backend_name + "' did not answer within " +
                                           std::to_string(c.config.limits.upstream_first_byte_timeout_ms) + " ms.",
                                       "backend_timeout")
            : ApiError::badGateway("backend '" + backend_name + "' failed: " + answer.error + ".",
                                   "backend_unreachable");
    logLine(LogLevel::warn, "request " + c.record.request_id + ": " + failure.message);
    http::response<http::string_body> response = errorResponse(c, failure, c.keep_alive);
    AnswerOutcome outcome;
    outcome.backend = backend_name;
    outcome.rank = int(slot.rank());
    outcome.rejection = failure.code;
    const bool written = co_await writeAnswer(c, response, outcome);
    co_return written&& response.keep_alive();
}

awaitable<bool> pumpAnswer(RequestContext& c, UpstreamExchange& exchange, SlotLease& slot, const ClientWatch& watch,
                           bool stream_usage_added, uint64_t sequences) {
    const size_t backend = slot.backend();
    const uint32_t rank = slot.rank();
    const conf::LimitsConfig& limits = c.config.limits;
    const std::string& backend_name = slot.backendName();
    UpstreamResponseParser& parser = exchange.answer();
    ClientStream& client = c.connection.stream();
    // Writes to a plain client try the socket first (write_now.hpp); TLS bytes go through the stream.
    tcp::socket* const client_socket = client.secure() ? nullptr : &client.socket();
    GaugeInFlight inflight{c.metrics ? c.local.slotMetrics(backend, rank).inflight : nullptr};
    RelayedAnswer answer(c);
    answer.outcome().backend = backend_name;
    answer.outcome().rank = int(rank);
    answer.outcome().status = parser.status();
    // A non-stream answer comes when the work is done; a stream's prefill
    // ends with its first body byte (below).
    const bool event_stream = beast::iequals(parser[http::field::content_type].substr(0, 17), "text/event-stream");
    if (!event_stream) slot.prefillDone();
    if (parser.status() >= 400 && !event_stream) co_return co_await relayErrorAnswer(c, exchange, slot, watch, answer);

    ResponseFraming framing;
    startFraming(c, framing, parser, backend_name, rank);
    const bool chunked = framing.body() == ResponseFraming::Body::chunked;

    // Usage for the per-slot token counters: from the final usage event of a
    // stream, or from a (small) JSON answer. The usage chunk dpgate asked for
    // is cut out of a re-chunked stream (a Content-Length stream cannot
    // change length, so it is only observed).
    UsageTap tap(!event_stream                   ? UsageTap::Mode::json
                 : stream_usage_added && chunked ? UsageTap::Mode::filter
                                                 : UsageTap::Mode::observe,
                 maxUsageTokens(c.config, sequences));

    const size_t chunk_bytes = limits.relay_buffer_bytes;
    struct Buffer {
        PathLocal& local;
        size_t bytes;
        std::unique_ptr<char[]> data;
        ~Buffer() { local.returnRelayBuffer(std::move(data), bytes); }
    } chunk{c.local, chunk_bytes, c.local.takeRelayBuffer(chunk_bytes)};

    // The header goes out with the first piece of body (one write, and for a
    // small answer the whole response in one write), except for event
    // streams, whose header the client should see before the first token.
    if (event_stream || parser.is_done()) {
        error_code hec;
        // The header is the whole answer when the body is done already.
        if (ClientWrite now = startWrite(c, client_socket, framing.next({}, parser.is_done()), parser.is_done());
            !now.done()) {
            client.expires_after(ms(limits.client_write_timeout_ms));
            hec = co_await writeRest(client, now);
        }
        if (hec) {
            answer.outcome().status = 0;
            co_return false;  // the client left; the connection closes with the upstream request
        }
        answer.firstByte();
    }

    error_code broke;  // the upstream failed after the bytes of this piece
    while (!parser.is_done()) {
        parser.body().data = chunk.data.get();
        parser.body().size = chunk_bytes;
        // What the buffer holds first, here: a small answer's body came with
        // its head, and needs no read (nor readBodyPiece's coroutine frame).
        error_code rec = parseBuffered(parser, exchange.connection().buffer);
        if (!rec && !parser.is_done() && parser.body().size == chunk_bytes) rec = co_await exchange.readBodyPiece();
        size_t got = chunk_bytes - parser.body().size;
        if (rec) {
            if (watch.clientGone()) {
                answer.outcome().stream_abort = "client";
                co_return false;
            }
            // The body bytes that came before the failure (the events before
            // a bad chunk header in the same read) go to a client that has
            // the head already; then the failure. One that has nothing yet
            // gets a clean error instead of a cut answer.
            broke = rec;
            if (got == 0 || !framing.headSent()) break;
        }
        if (got == 0) continue;
        slot.prefillDone();
        const bool last = parser.is_done();
        std::string_view piece =
            tap.pass(std::string_view(chunk.data.get(), got), answer.outcome().bytes_out == 0, last);
        // A filtered stream holds an unfinished event back; the last write below ends the body.
        if (piece.empty() && tap.mode() == UsageTap::Mode::filter) {
            if (broke) break;
            continue;
        }
        error_code wec;
        if (ClientWrite now = startWrite(c, client_socket, framing.next(piece, last), last); !now.done()) {
            client.expires_after(ms(limits.client_write_timeout_ms));
            wec = co_await writeRest(client, now);
        }
        if (wec) {
            // The client left or stopped draining: drop the upstream too.
            answer.outcome().stream_abort = "client";
            co_return false;
        }
        answer.sent(piece.size());
        answer.firstByte();
        if (broke) break;
    }
    if (broke) {
        co_await answerBrokeOff(c, broke, backend_name, framing, event_stream && chunked, tap, answer);
        co_return false;
    }

    error_code fec;
    if (!framing.finished()) {
        const std::string_view held = tap.finish();
        if (ClientWrite now = startWrite(c, client_socket, framing.next(held, true), true); !now.done()) {
            client.expires_after(ms(limits.client_write_timeout_ms));
            fec = co_await writeRest(client, now);
        }
        if (!fec && !framing.empty()) answer.sent(held.size());
    }

    answer.firstByte();
    bool implausible = false;
    answer.outcome().usage = tap.usage(implausible);
    // Ignored: without a usage in the record nothing is counted from it.
    if (implausible && c.metrics) c.metrics->backend_usage_invalid.with({backend_name}).inc();
    exchange.release(backend, true);
    co_return (!fec && c.keep_alive);
}

}  // namespace dpgate::gateway
