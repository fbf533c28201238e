#include "gateway/path/relay.hpp"

#include "gateway/http/forwarded_headers.hpp"
#include "gateway/http/head_writer.hpp"
#include "gateway/http/parse_buffered.hpp"
#include "gateway/http/response_framing.hpp"
#include "gateway/http/upstream_error.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/metrics/in_flight.hpp"
#include "gateway/net/write_now.hpp"
#include "gateway/platform/cycle_clock.hpp"
#include "gateway/platform/log.hpp"
#include "gateway/platform/string_pool.hpp"
#include "gateway/process/client_session.hpp"
#include "gateway/process/server.hpp"
#include "gateway/process/worker.hpp"
#include "gateway/usage/stream_usage.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>

#include <charconv>
#include <cstring>

#include <sys/socket.h>

namespace dpgate::gateway {

using namespace std::string_view_literals;

// Shared with the watch coroutine, which may outlive the Relay.
struct Relay::ClientWatch {
    bool active = true;
    bool client_gone = false;
    UpstreamConnection* upstream = nullptr;
};

namespace {

bool isConnectionDrop(const error_code& ec) {
    return ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
           ec == net::error::broken_pipe || ec == net::error::connection_aborted;
}

std::string sseErrorEvent(const std::string& message) {
    const ApiError error = ApiError::badGateway(message, "stream_interrupted");
    // The event supplies its own framing: no trailing newline.
    return "data: " + error.json() + "\n\n";
}

}  // namespace

Relay::Relay(RequestContext& context, const admission::Admitted& admitted, bool stream_usage_added)
    : c_(context), admitted_(admitted), stream_usage_added_(stream_usage_added), upstream_head_(StringPool::take()) {}

Relay::~Relay() {
    StringPool::give(std::move(upstream_head_));
    if (!watch_) return;
    watch_->active = false;
    watch_->upstream = nullptr;
    error_code ec;
    c_.session.stream().socket().cancel(ec);
}

void Relay::watchClient() {
    watch_ = std::make_shared<ClientWatch>();
    net::co_spawn(c_.worker.io(), watch(c_.session.shared_from_this(), watch_), net::detached);
}

awaitable<void> Relay::watch(std::shared_ptr<ClientSession> session, std::shared_ptr<ClientWatch> watch) {
    // Owns what it touches: it may complete after the Relay is gone.
    auto& socket = session->stream().socket();
    auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, use_nothrow);
    if (!watch->active || ec) co_return;
    char byte;
    ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    bool gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    if (!gone) co_return;  // a pipelined request: it waits in the socket for its turn
    watch->client_gone = true;
    if (watch->upstream) watch->upstream->stream.close();
}

void Relay::buildUpstreamRequest(size_t backend, uint32_t rank) {
    const conf::BackendConfig& config = c_.server.backends().config(backend);
    const ClientRequest& request = c_.request;
    const std::string& body = request.body();
    splice_.clear();
    if (admitted_.inserted_max_tokens) splice_.append(admitted_.splice_text);
    if (stream_usage_added_) splice_.append(R"("stream_options":{"include_usage":true},)"sv);
    const size_t body_bytes = body.size() + splice_.size();

    std::string& h = upstream_head_;
    h.clear();
    const std::string_view method = request.method_string(), target = request.target();
    {
        HeadWriter w(h, 64 + method.size() + target.size() + config.host.size());
        w.put(method).put(" "sv).put(target).put(" HTTP/1.1\r\nHost: "sv).put(config.host).put(":"sv);
        w.put(uint64_t(config.port)).put("\r\n"sv);
    }
    // The client's credentials stay at the gateway; the rank is dpgate's to set.
    static const FieldNames kSetHere = {
        "host", "authorization", "x-data-parallel-rank", "x-forwarded-for", "x-request-id", "content-length", "expect"};
    appendEndToEndFields(request.fields(), h, kSetHere);
    const std::string_view forwarded_for = request[beast::string_view("X-Forwarded-For")];
    const std::string_view peer = c_.session.peerAddress();
    {
        HeadWriter w(h, 160 + forwarded_for.size() + peer.size() + c_.record.request_id.size());
        w.put("X-Forwarded-For: "sv);
        if (!forwarded_for.empty()) w.put(forwarded_for).put(", "sv);
        w.put(peer).put("\r\nX-Request-ID: "sv).put(c_.record.request_id);
        w.put("\r\nX-data-parallel-rank: "sv).put(uint64_t(rank)).put("\r\n"sv);
        if (!config.credential_env.empty())
            if (const char* token = std::getenv(config.credential_env.c_str()))
                w.put("Authorization: Bearer "sv).put(token).put("\r\n"sv);
        w.put("Content-Length: "sv).put(uint64_t(body_bytes)).put("\r\n\r\n"sv);
    }  // h now ends after the head

    if (!splice_.empty()) {
        upstream_buffers_ = {net::buffer(h), net::buffer(body.data(), admitted_.splice_offset), net::buffer(splice_),
                             net::buffer(body.data() + admitted_.splice_offset, body.size() - admitted_.splice_offset)};
    } else {
        upstream_buffers_ = {net::buffer(h), net::buffer(body), net::const_buffer(), net::const_buffer()};
    }
}

awaitable<UpstreamAnswer> Relay::send(const SlotLease& slot) {
    if (watch_) watch_->upstream = nullptr;
    connection_.reset();
    buildUpstreamRequest(slot.backend(), slot.rank());
    UpstreamPool& pool = c_.worker.pool(slot.backend());
    error_code error;
    UpstreamPool::Drops drops;
    connection_ = pool.takeIdle(&drops);
    if (drops.bytes_waiting != 0) countDropped(slot.backend(), "bytes_while_idle", drops.bytes_waiting);
    if (drops.closed != 0) countDropped(slot.backend(), "closed_while_idle", drops.closed);
    if (!connection_) {
        auto [cec, fresh] = co_await pool.connect();
        error = cec;
        connection_ = std::move(fresh);
    }
    const conf::LimitsConfig& limits = c_.config.limits;
    for (int stale = 0; connection_ && stale < 2; ++stale) {
        // One exchange: the request written, the answer's head read and
        // parsed (here, not in a coroutine of its own: one frame fewer per
        // request). The parser has no body window yet, so parsing stops after
        // the head and body bytes stay in connection.buffer.
        if (watch_) watch_->upstream = connection_.get();
        UpstreamConnection& connection = *connection_;
        Parser& parser = connection.answer.emplace();
        Attempt outcome = Attempt::ok;
        error_code rec;
        // The head is read drain-aware, with the end checked (timed_socket.hpp):
        // when the answer ends with a short read, the reactor then knows the
        // socket was drained there, and the pool tells without a system call
        // whether the backend sent anything after it (upstream_pool.cpp). A
        // backend that closes right after part of a head is seen at the next
        // recheck, within a second, instead of at once.
        connection.stream.readDrainAwareChecked(true);
        if (WriteNow now(&connection.stream.socket(), upstream_buffers_); !now.done()) {
            connection.stream.expires_after(ms(limits.stream_idle_timeout_ms));
            rec = co_await writeRest(connection.stream, now);
        } else {
            connection.stream.waitBeforeNextRead();  // written whole, here and now
        }
        if (!rec) connection.stream.expires_after(ms(limits.upstream_first_byte_timeout_ms));
        while (!rec && !parser.is_header_done()) {
            constexpr size_t kReadBytes = 16 * 1024;
            auto [read_ec, rn] =
                co_await connection.stream.async_read_some(connection.buffer.prepare(kReadBytes), use_nothrow);
            rec = read_ec;
            if (rec) break;
            connection.buffer.commit(rn);
            rec = parseBuffered(parser, connection.buffer);
        }
        if (rec) {
            error = rec;
            // A pooled connection the backend closed while it sat idle fails
            // before any byte of an answer: the request never ran, send it again.
            outcome = connection.reused && !parser.got_some() && isConnectionDrop(rec) ? Attempt::retry_fresh
                                                                                       : Attempt::failed;
        }
        if (outcome == Attempt::ok) break;
        if (watch_) watch_->upstream = nullptr;
        connection_.reset();
        if (outcome == Attempt::retry_fresh && !(watch_ && watch_->client_gone)) {
            auto [fec, fresh] = co_await pool.connect();
            error = fec;
            connection_ = std::move(fresh);
        }
    }
    UpstreamAnswer answer;
    if (watch_ && watch_->client_gone) {
        answer.kind = UpstreamAnswer::Kind::client_gone;
    } else if (connection_) {
        answer.kind = UpstreamAnswer::Kind::answered;
        answer.status = connection_->answer->status();
    } else {
        answer.kind = error == beast::error::timeout ? UpstreamAnswer::Kind::timed_out : UpstreamAnswer::Kind::failed;
        answer.error = error.message();
    }
    co_return answer;
}

awaitable<bool> Relay::answerFailure(const SlotLease& slot, const UpstreamAnswer& answer) {
    const std::string& backend_name = slot.backendName();
    ApiError failure =
        answer.kind == UpstreamAnswer::Kind::timed_out
            ? ApiError::gatewayTimeout("backend '" + backend_name + "' did not answer within " +
                                           std::to_string(c_.config.limits.upstream_first_byte_timeout_ms) + " ms.",
                                       "backend_timeout")
            : ApiError::badGateway("backend '" + backend_name + "' failed: " + answer.error + ".",
                                   "backend_unreachable");
    logLine(LogLevel::warn, "request " + c_.record.request_id + ": " + failure.message);
    c_.record.backend = backend_name;
    c_.record.rank = int(slot.rank());
    co_return co_await c_.session.writeError(failure, c_.keep_alive);
}

awaitable<error_code> Relay::readBodyPiece(UpstreamConnection& connection, Parser& parser) {
    const size_t room = parser.body().size;
    error_code ec = parseBuffered(parser, connection.buffer);
    if (ec || parser.is_done() || parser.body().size != room) co_return ec;
    connection.stream.expires_after(ms(c_.config.limits.stream_idle_timeout_ms));
    // A body whose end its bytes tell is read drain-aware: a stream's events
    // come a short read each, and the read after each would first fail a
    // recv() (drain_aware_read.hpp).
    connection.stream.readDrainAwareChecked(!parser.need_eof());
    // A body that runs to the close ends at the end of the stream, which may
    // have come with the bytes of the drain-aware head read: try at once.
    if (parser.need_eof()) tryNextReadAtOnce(connection.stream.socket());
    constexpr size_t kReadBytes = 64 * 1024;
    auto [read_ec, n] = co_await connection.stream.async_read_some(connection.buffer.prepare(kReadBytes), use_nothrow);
    if (read_ec == net::error::eof) {
        // The backend closed: the end of a body that runs to the close, or a cut answer.
        parser.put_eof(ec);
        co_return ec;
    }
    if (read_ec) co_return read_ec;
    connection.buffer.commit(n);
    co_return parseBuffered(parser, connection.buffer);
}

void Relay::releaseConnection(size_t backend, bool whole) {
    if (!connection_ || !whole || !connection_->answer->keep_alive()) return;
    if (connection_->buffer.size() != 0) {
        // More than the answer came: whatever it is, it answers no request
        // this connection would carry next.
        countDropped(backend, "bytes_after_answer", 1);
        return;
    }
    if (watch_ && watch_->client_gone) return;
    if (watch_) watch_->upstream = nullptr;
    connection_->answer.reset();
    c_.worker.pool(backend).release(std::move(connection_));
}

void Relay::countDropped(size_t backend, const char* reason, uint32_t n) const {
    if (c_.metrics) c_.metrics->upstream_dropped.with({c_.server.backends().config(backend).name, reason}).inc(n);
}

uint64_t Relay::maxUsageTokens() const {
    uint64_t most = 0;
    if (__builtin_mul_overflow(c_.config.model.window_tokens, admitted_.sequences, &most)) return UINT64_MAX;
    return most;
}

awaitable<bool> Relay::relayErrorAnswer(SlotLease& slot) {
    const std::string& backend_name = slot.backendName();
    Parser& parser = *connection_->answer;
    const unsigned status = parser.status();
    constexpr size_t kMaxErrorBytes = 64 * 1024;
    std::string body;
    char chunk[8192];
    while (!parser.is_done() && body.size() <= kMaxErrorBytes) {
        parser.body().data = chunk;
        parser.body().size = sizeof chunk;
        error_code ec = co_await readBodyPiece(*connection_, parser);
        if (ec) {
            if (watch_ && watch_->client_gone) co_return false;
            ApiError failure = ApiError::badGateway("backend '" + backend_name + "' broke off its " +
                                                        std::to_string(status) + " answer: " + ec.message() + ".",
                                                    "backend_error");
            co_return co_await c_.session.writeError(failure, false);
        }
        body.append(chunk, sizeof chunk - parser.body().size);
    }
    const bool whole = parser.is_done();
    http::response<http::string_body> response{http::int_to_status(status), 11};
    response.set(http::field::content_type, "application/json");
    response.set("X-Request-ID", c_.record.request_id);
    response.set("X-Dpgate-Route", backend_name + "/" + std::to_string(slot.rank()));
    if (parser.has(http::field::retry_after)) response.set(http::field::retry_after, parser[http::field::retry_after]);
    response.keep_alive(c_.keep_alive);
    response.body() = openAiErrorBody(status, whole ? std::string_view(body) : std::string_view(), backend_name,
                                      &c_.record.rejection);
    bool written = co_await c_.session.writeResponse(response);
    releaseConnection(slot.backend(), whole);
    co_return (written && c_.keep_alive);
}

void Relay::firstByteSent() {
    if (c_.record.ttfb_seconds >= 0) return;
    c_.record.ttfb_seconds = std::chrono::duration<double>(CycleClock::now() - c_.record.started).count();
}

void Relay::startFraming(ResponseFraming& framing, const Parser& parser, const std::string& backend_name,
                         uint32_t rank) const {
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
    framing.start(parser, parser.status(), body, length, c_.keep_alive, c_.record.request_id,
                  std::string_view(route, size_t(route_end - route)));
}

awaitable<void> Relay::answerBrokeOff(error_code error, const std::string& backend_name, ResponseFraming& framing,
                                      bool sse_chunked, SseUsageParser* events) {
    const conf::LimitsConfig& limits = c_.config.limits;
    const bool header_sent = framing.headSent();
    if (header_sent) c_.record.stream_abort = "upstream";
    std::string why = error == beast::error::timeout
                          ? "no data for " + std::to_string(limits.stream_idle_timeout_ms) + " ms"
                          : error.message();
    logLine(LogLevel::warn,
            "request " + c_.record.request_id + ": upstream " + backend_name + " broke mid-response: " + why);
    if (!header_sent) {
        // Nothing reached the client yet: it gets a clean gateway error.
        ApiError failure = ApiError::badGateway("backend '" + backend_name + "' broke off its response: " + why + ".",
                                                "backend_error");
        co_await c_.session.writeError(failure, false);
        co_return;
    }
    c_.record.rejection = "stream_interrupted";
    if (sse_chunked) {
        // The client must see a failure, not a stream that merely ends.
        // Every whole event went out before this (relayAnswer); one the
        // stream broke inside is dropped, as a client drops an event its
        // stream ends inside, unless the client has its start already:
        // then it is ended first, so that the error is an event of its own.
        std::string event;
        if (events && events->brokeOff()) event = "\n\n";
        event.append(sseErrorEvent("the upstream stream from backend '" + backend_name +
                                   "' broke before it completed: " + why + "."));
        ClientStream& client = c_.session.stream();
        client.expires_after(ms(limits.client_write_timeout_ms));
        co_await net::async_write(client, framing.next(event, false), use_nothrow);
        c_.record.bytes_out += event.size();
    }
    c_.session.close();
}

awaitable<bool> Relay::relayAnswer(SlotLease& slot) {
    const size_t backend = slot.backend();
    const uint32_t rank = slot.rank();
    const conf::LimitsConfig& limits = c_.config.limits;
    const std::string& backend_name = slot.backendName();
    Parser& parser = *connection_->answer;
    UpstreamConnection& connection = *connection_;
    ClientStream& client = c_.session.stream();
    // Writes to a plain client try the socket first (write_now.hpp); TLS bytes go through the stream.
    tcp::socket* const client_socket = client.secure() ? nullptr : &client.socket();
    GaugeInFlight inflight{c_.metrics ? c_.worker.slotMetrics(backend, rank).inflight : nullptr};
    c_.record.backend = backend_name;
    c_.record.rank = int(rank);
    c_.record.status = parser.status();
    // A non-stream answer comes when the work is done; a stream's prefill
    // ends with its first body byte (below).
    const bool event_stream = beast::iequals(parser[http::field::content_type].substr(0, 17), "text/event-stream");
    if (!event_stream) slot.prefillDone();
    if (parser.status() >= 400 && !event_stream) co_return co_await relayErrorAnswer(slot);

    ResponseFraming framing;
    startFraming(framing, parser, backend_name, rank);
    const bool chunked = framing.body() == ResponseFraming::Body::chunked;

    // Usage for the per-slot token counters: from the final usage event of a
    // stream, or from a (small) JSON answer. The usage chunk dpgate asked for
    // is cut out of a re-chunked stream (a Content-Length stream cannot
    // change length, so it is only observed).
    SseUsageParser stream_usage(SseUsageParser::kDefaultMaxEventBytes, maxUsageTokens());
    const bool filter_usage = event_stream && stream_usage_added_ && chunked;
    std::string filtered;
    std::string answer_copy;
    bool copy_cut = false;          // answer_copy holds only the answer's end
    std::string_view whole_answer;  // a body that came in one piece, read where it lies
    constexpr size_t kAnswerCopyBytes = 1 << 20;
    constexpr size_t kAnswerEndBytes = 64 << 10;

    struct Buffer {
        Worker& worker;
        std::unique_ptr<char[]> data;
        ~Buffer() { worker.returnRelayBuffer(std::move(data)); }
    } chunk{c_.worker, c_.worker.takeRelayBuffer()};
    const size_t chunk_bytes = limits.relay_buffer_bytes;

    // The header goes out with the first piece of body (one write, and for a
    // small answer the whole response in one write), except for event
    // streams, whose header the client should see before the first token.
    if (event_stream || parser.is_done()) {
        if (parser.is_done()) c_.key_lease.release();  // the header is the whole answer
        error_code hec;
        if (WriteNow now(client_socket, framing.next({}, parser.is_done())); !now.done()) {
            client.expires_after(ms(limits.client_write_timeout_ms));
            hec = co_await writeRest(client, now);
        }
        if (hec) {
            c_.record.status = 0;
            co_return false;  // the client left; the connection closes with the upstream request
        }
        firstByteSent();
    }

    error_code broke;  // the upstream failed after the bytes of this piece
    while (!parser.is_done()) {
        parser.body().data = chunk.data.get();
        parser.body().size = chunk_bytes;
        // What the buffer holds first, here: a small answer's body came with
        // its head, and needs no read (nor readBodyPiece's coroutine frame).
        error_code rec = parseBuffered(parser, connection.buffer);
        if (!rec && !parser.is_done() && parser.body().size == chunk_bytes)
            rec = co_await readBodyPiece(connection, parser);
        size_t got = chunk_bytes - parser.body().size;
        if (rec) {
            if (watch_ && watch_->client_gone) {
                c_.record.stream_abort = "client";
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
        std::string_view piece(chunk.data.get(), got);
        if (filter_usage) {
            filtered.clear();
            stream_usage.filter(piece, filtered);
            if (parser.is_done()) stream_usage.finish(&filtered);
            piece = filtered;
            // An unfinished event is held back; the last write below ends the body.
            if (piece.empty()) {
                if (broke) break;
                continue;
            }
        } else if (event_stream) {
            stream_usage.observe(piece);
        } else if (c_.record.bytes_out == 0 && parser.is_done()) {
            whole_answer = piece;  // the chunk buffer holds it until the end
        } else {
            answer_copy.append(piece);
            if (answer_copy.size() > kAnswerCopyBytes) {
                // Past 1 MiB (logprobs, many choices) only the answer's end
                // is kept: its usage is there.
                copy_cut = true;
                answer_copy.erase(0, answer_copy.size() - kAnswerEndBytes);
            }
        }
        const bool last = parser.is_done();
        if (last) c_.key_lease.release();
        error_code wec;
        if (WriteNow now(client_socket, framing.next(piece, last)); !now.done()) {
            client.expires_after(ms(limits.client_write_timeout_ms));
            wec = co_await writeRest(client, now);
        }
        if (wec) {
            // The client left or stopped draining: drop the upstream too.
            c_.record.stream_abort = "client";
            co_return false;
        }
        c_.record.bytes_out += piece.size();
        firstByteSent();
        if (broke) break;
    }
    if (broke) {
        co_await answerBrokeOff(broke, backend_name, framing, event_stream && chunked,
                                event_stream ? &stream_usage : nullptr);
        co_return false;
    }

    error_code fec;
    if (!framing.finished()) {
        filtered.clear();
        if (filter_usage) stream_usage.finish(&filtered);
        c_.key_lease.release();
        const ResponseFraming::Buffers& tail = framing.next(filtered, true);
        if (!framing.empty()) {
            if (WriteNow now(client_socket, tail); !now.done()) {
                client.expires_after(ms(limits.client_write_timeout_ms));
                fec = co_await writeRest(client, now);
            }
            if (!fec) c_.record.bytes_out += filtered.size();
        }
    }

    firstByteSent();
    bool implausible = false;
    if (event_stream) {
        if (!filter_usage) stream_usage.finish();
        c_.record.usage = stream_usage.usage();
        implausible = stream_usage.implausibleUsage();
    } else {
        const UsageCheck check{.max_tokens = maxUsageTokens(), .implausible = &implausible};
        c_.record.usage =
            copy_cut ? parseUsageJsonEnd(answer_copy, check)
                     : parseUsageJson(whole_answer.empty() ? std::string_view(answer_copy) : whole_answer, check);
    }
    if (implausible) {
        // Ignored: without a usage in the record nothing is counted from it.
        c_.record.usage.reset();
        if (c_.metrics) c_.metrics->backend_usage_invalid.with({backend_name}).inc();
    }
    releaseConnection(backend, true);
    co_return (!fec && c_.keep_alive);
}
}  // namespace dpgate::gateway
