#include "gateway/relay.hpp"

#include "gateway/forwarded_headers.hpp"
#include "gateway/log.hpp"
#include "gateway/stream_usage.hpp"
#include "gateway/parse_buffered.hpp"
#include "gateway/response_framing.hpp"
#include "routing/affinity_key.hpp"
#include "gateway/server.hpp"
#include "gateway/upstream_error.hpp"
#include "gateway/worker.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>

#include <charconv>
#include <cstring>

#include <sys/socket.h>

namespace dpgate::gateway {

// Watches the client socket while the response is prepared and relayed: a
// client that hangs up (EOF or reset) closes the upstream connection at once,
// even during a prefill that has not produced a byte yet.
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
    ApiError error{502, message, "upstream_error", "", "stream_interrupted"};
    std::string body = error.body();
    body.pop_back();  // the trailing newline: the event supplies its own framing
    return "data: " + body + "\n\n";
}

}  // namespace

Relay::Relay(ClientSession& session, ClientRequest& request, AccessRecord& record, bool keep_alive,
             const conf::KeyInfo* key)
    : session_(session),
      request_(request),
      record_(record),
      request_id_(record.request_id),
      keep_alive_(keep_alive),
      key_(key),
      metrics_on_(session.worker().server().config().metrics.enabled),
      watch_(std::make_shared<ClientWatch>()) {}

void Relay::buildUpstreamRequest(size_t backend, uint32_t rank, const admission::Admitted& admitted) {
    const conf::BackendConfig& config = session_.worker().server().backends().config(backend);
    const std::string& body = request_.body();
    splice_.clear();
    if (admitted.inserted_max_tokens) splice_.append(admitted.splice_text);
    if (stream_usage_added_) splice_.append(R"("stream_options":{"include_usage":true},)");
    const size_t body_bytes = body.size() + splice_.size();

    std::string& h = upstream_head_;
    h.reserve(512 + request_.target().size());
    h.append(request_.method_string()).append(" ").append(request_.target()).append(" HTTP/1.1\r\n");
    h.append("Host: ").append(config.host).append(":").append(std::to_string(config.port)).append("\r\n");
    // The client's credentials stay at the gateway; the rank is dpgate's to set.
    appendEndToEndFields(request_.base(), h,
                         {"host", "authorization", "x-data-parallel-rank", "x-forwarded-for", "x-request-id",
                          "content-length", "expect"});
    std::string_view forwarded_for = request_[beast::string_view("X-Forwarded-For")];
    h.append("X-Forwarded-For: ");
    if (!forwarded_for.empty()) h.append(forwarded_for).append(", ");
    h.append(session_.peerAddress()).append("\r\n");
    h.append("X-Request-ID: ").append(request_id_).append("\r\n");
    h.append("X-data-parallel-rank: ").append(std::to_string(rank)).append("\r\n");
    if (!config.credential_env.empty())
        if (const char* token = std::getenv(config.credential_env.c_str()))
            h.append("Authorization: Bearer ").append(token).append("\r\n");
    h.append("Content-Length: ").append(std::to_string(body_bytes)).append("\r\n\r\n");

    if (!splice_.empty()) {
        upstream_buffers_ = {net::buffer(h), net::buffer(body.data(), admitted.splice_offset),
                             net::buffer(splice_),
                             net::buffer(body.data() + admitted.splice_offset, body.size() - admitted.splice_offset)};
    } else {
        upstream_buffers_ = {net::buffer(h), net::buffer(body), net::const_buffer(), net::const_buffer()};
    }
}

awaitable<void> Relay::watchClient(std::shared_ptr<ClientSession> session, std::shared_ptr<ClientWatch> watch) {
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

awaitable<Relay::Attempt> Relay::exchange(UpstreamConnection& connection,
                                          http::response_parser<http::buffer_body>& parser, error_code& error) {
    const conf::LimitsConfig& limits = session_.worker().server().config().limits;
    connection.stream.expires_after(ms(limits.stream_idle_timeout_ms));
    auto [wec, wn] = co_await net::async_write(connection.stream, upstream_buffers_, use_nothrow);
    if (wec) {
        error = wec;
        co_return connection.reused && isConnectionDrop(wec) ? Attempt::retry_fresh : Attempt::failed;
    }
    connection.stream.expires_after(ms(limits.upstream_first_byte_timeout_ms));
    // The header, read and parsed here; the body parser has no buffer yet, so
    // parsing stops after the header and body bytes stay in connection.buffer.
    error_code rec;
    while (!rec && !parser.is_header_done()) {
        constexpr size_t kReadBytes = 16 * 1024;
        auto [read_ec, rn] = co_await connection.stream.async_read_some(connection.buffer.prepare(kReadBytes), use_nothrow);
        rec = read_ec;
        if (rec) break;
        connection.buffer.commit(rn);
        rec = parseBuffered(parser, connection.buffer);
    }
    if (rec) {
        error = rec;
        // A pooled connection the backend closed while it sat idle fails
        // before any byte of an answer: the request never ran, send it again.
        co_return connection.reused && !parser.got_some() && isConnectionDrop(rec) ? Attempt::retry_fresh
                                                                                   : Attempt::failed;
    }
    co_return Attempt::ok;
}

Relay::~Relay() {
    if (!metrics_on_) return;
    metrics::GatewayMetrics& m = session_.worker().server().metrics();
    session_.worker().requestCounter(record_.path, record_.status).inc();
    m.request_duration_seconds.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
}

awaitable<bool> Relay::run() {
    Worker& worker = session_.worker();
    Server& server = worker.server();
    const conf::LimitsConfig& limits = server.config().limits;

    // Judged before any backend sees it: what cannot succeed is refused here.
    std::string_view path = request_.target().substr(0, request_.target().find('?'));
    admission::Endpoint endpoint = path == "/v1/completions" ? admission::Endpoint::completions
                                                             : admission::Endpoint::chat_completions;
    auto admit_start = std::chrono::steady_clock::now();
    admission::Verdict verdict =
        worker.admitter().admit(request_.body(), request_.body().capacity(), endpoint,
                                worker.admissionLimits(server.backends().publicWindow()));
    metrics::GatewayMetrics& m = server.metrics();
    if (metrics_on_)
        m.admission_seconds.observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - admit_start).count());
    if (auto* refused = std::get_if<admission::Refused>(&verdict)) {
        if (refused->code.empty()) refused->code = "invalid_request_error";
        if (metrics_on_) m.admission_rejections.with({refused->code}).inc();
        ApiError error{refused->http_status, std::move(refused->message), std::move(refused->type),
                       std::move(refused->param), std::move(refused->code)};
        co_return co_await session_.writeError(error, request_id_, keep_alive_);
    }
    const admission::Admitted& admitted = std::get<admission::Admitted>(verdict);
    record_.stream = admitted.stream;
    record_.images = admitted.images;
    // Tokens of every stream are counted: a client that did not ask for the
    // usage chunk gets the stream without it.
    stream_usage_added_ = admitted.stream && !admitted.has_stream_options && server.config().metrics.stream_usage;
    checked_prompt_tokens_ = admitted.expected_usage_prompt_tokens;

    BackendRegistry& backends = server.backends();
    std::shared_ptr<const RoutingTable> table = backends.routingTable();
    if (!table || table->chooser.size() == 0) {
        ApiError error{503, "no backend is available: every backend is down or drained.", "upstream_error", "",
                       "backend_unavailable"};
        co_return co_await session_.writeError(error, request_id_, keep_alive_);
    }

    // Every turn of a conversation goes to the slot holding its prefix; the
    // preference list is where it goes when that slot is overloaded or fails.
    std::string_view session_key = request_[server.config().routing.session_header];
    routing::AffinityKey key = routing::affinityKey(
        session_key.empty() ? std::nullopt : std::optional<std::string_view>(session_key),
        admitted.has_prompt_cache_key ? std::optional<std::string_view>(admitted.prompt_cache_key) : std::nullopt,
        admitted.head_hash);
    std::vector<double> loads(table->chooser.size());
    for (size_t i = 0; i < loads.size(); ++i)
        loads[i] = double(backends.slotLoad(table->load_index[i]).load(std::memory_order_relaxed));
    // Loads and costs are prompt tokens not expected in a slot's cache.
    const double prompt_tokens = double(admitted.prompt_tokens);
    routing::CacheEstimate& cache_estimate = backends.cacheEstimate();
    std::vector<double> uncached(table->chooser.size());
    const std::optional<size_t> last_slot = cache_estimate.uncachedTokens(key.key, table->chooser, prompt_tokens, uncached);
    // New conversations avoid ranks that did more than their share of the
    // recent prefill work; known ones stay on the rank that served them last.
    routing::WorkMeter& work_meter = backends.workMeter();
    const double now_s = routing::meterSeconds(started_);
    std::vector<double> work(table->chooser.size());
    work_meter.values(table->load_index, now_s, work);
    std::vector<size_t> preference =
        table->chooser.preference({key.key, loads, uncached, prompt_tokens, work, last_slot});

    // Watching the client costs a coroutine and an epoll re-arm per request;
    // it pays where a hang-up would otherwise leave the backend working for
    // long: streams, and prompts whose prefill takes noticeable time.
    constexpr uint64_t kWatchPromptTokens = 4096;
    if (admitted.stream || admitted.prompt_tokens >= kWatchPromptTokens)
        net::co_spawn(worker.io(), watchClient(session_.shared_from_this(), watch_), net::detached);
    struct StopWatch {
        Relay& relay;
        ~StopWatch() {
            relay.watch_->active = false;
            relay.watch_->upstream = nullptr;
            error_code ec;
            relay.session_.stream().socket().cancel(ec);
        }
    } stop_watch{*this};

    // One try on the key's slot, and one retry on its next choice while no
    // byte has reached the client (on another backend when the failure was
    // the backend's own). Nothing is retried after the first byte.
    error_code error;
    std::unique_ptr<UpstreamConnection> connection;
    std::optional<http::response_parser<http::buffer_body>> parser;
    size_t backend = 0;
    uint32_t rank = 0;
    size_t choice = 0;
    for (int attempt = 0; attempt < 2 && !connection && choice < preference.size(); ++attempt) {
        const routing::Slot& slot = table->chooser.slots()[preference[choice]];
        backend = slot.backend_index;
        rank = slot.rank;
        // Operators' smoke tests pin a rank ("X-data-parallel-rank: 0");
        // only a trusted key may, and only to a rank the backend has.
        if (key_ && key_->trusted && attempt == 0) {
            std::string_view pin = request_[beast::string_view("X-data-parallel-rank")];
            uint32_t pinned = 0;
            auto [end, ec] = std::from_chars(pin.data(), pin.data() + pin.size(), pinned);
            if (!pin.empty() && ec == std::errc() && end == pin.data() + pin.size() &&
                pinned < backends.config(backend).dp_ranks)
                rank = pinned;
        }
        const uint64_t slot_id = routing::SlotChooser::slotIdOf(routing::Slot{backend, backends.config(backend).name, rank});
        const double expected_uncached = prompt_tokens - cache_estimate.cachedTokens(key.key, slot_id, prompt_tokens);
        const size_t load_index = backends.loadIndex(backend, rank);
        slot_load_.hold(backends.slotLoad(load_index), int64_t(expected_uncached));
        if (work_slot_ != SIZE_MAX) work_meter.add(work_slot_, -work_charged_, now_s);  // the try that failed
        work_slot_ = load_index;
        work_charged_ = expected_uncached;
        work_meter.add(work_slot_, work_charged_, now_s);
        cache_estimate.record(key.key, slot_id, prompt_tokens);
        upstream_head_.clear();
        buildUpstreamRequest(backend, rank, admitted);

        UpstreamPool& pool = worker.pool(backend);
        auto [cec, acquired] = co_await pool.acquire();
        error = cec;
        connection = std::move(acquired);
        for (int stale = 0; connection && stale < 2; ++stale) {
            watch_->upstream = connection.get();
            parser.emplace();
            parser->body_limit(boost::none);  // a response is streamed, never held
            Attempt outcome = co_await exchange(*connection, *parser, error);
            if (outcome == Attempt::ok) break;
            watch_->upstream = nullptr;
            connection.reset();
            if (outcome == Attempt::retry_fresh && !watch_->client_gone) {
                auto [fec, fresh] = co_await pool.connect();
                error = fec;
                connection = std::move(fresh);
            }
        }
        if (watch_->client_gone) co_return false;

        const std::string& name = backends.config(backend).name;
        unsigned status = connection ? parser->get().result_int() : 0;
        bool backend_failed = !connection && error != beast::error::timeout;
        bool overloaded = status == 502 || status == 503 || status == 504;
        if (!backend_failed && !overloaded) break;
        std::string why = backend_failed ? error.message() : "answered " + std::to_string(status);
        backends.recordPassiveFailure(backend, why);
        if (attempt == 1) break;  // the last answer, even a 5xx, goes to the client as it is

        // The suspicion just rebuilt the routing table (in failover mode the
        // standby's ranks replace the primary's): the retry goes to the key's
        // first choice there, never back to the slot that failed.
        table = backends.routingTable();
        if (!table || table->chooser.size() == 0) break;
        loads.assign(table->chooser.size(), 0.0);
        for (size_t i = 0; i < loads.size(); ++i)
            loads[i] = double(backends.slotLoad(table->load_index[i]).load(std::memory_order_relaxed));
        uncached.assign(table->chooser.size(), 0.0);
        cache_estimate.uncachedTokens(key.key, table->chooser, prompt_tokens, uncached);
        work.assign(table->chooser.size(), 0.0);
        work_meter.values(table->load_index, now_s, work);
        preference = table->chooser.preference({key.key, loads, uncached, prompt_tokens, work, std::nullopt});
        choice = 0;
        while (choice < preference.size() && table->chooser.slots()[preference[choice]].backend_index == backend &&
               table->chooser.slots()[preference[choice]].rank == rank)
            ++choice;
        if (choice >= preference.size()) break;
        if (metrics_on_) m.upstream_retries.inc();
        ++record_.retries;
        const routing::Slot& next = table->chooser.slots()[preference[choice]];
        logLine(LogLevel::warn, "request " + request_id_ + ": backend " + name + " rank " + std::to_string(rank) +
                                    " " + why + "; retrying on " + next.backend_name + " rank " +
                                    std::to_string(next.rank));
        connection.reset();
    }
    const std::string& backend_name = backends.config(backend).name;
    if (!connection) {
        bool timed_out = error == beast::error::timeout;
        ApiError failure{timed_out ? 504u : 502u,
                         timed_out ? "backend '" + backend_name + "' did not answer within " +
                                         std::to_string(limits.upstream_first_byte_timeout_ms) + " ms."
                                   : "backend '" + backend_name + "' failed: " + error.message() + ".",
                         "upstream_error", "", timed_out ? "backend_timeout" : "backend_unreachable"};
        logLine(LogLevel::warn, "request " + request_id_ + ": " + failure.message);
        record_.backend = backend_name;
        record_.rank = int(rank);
        co_return co_await session_.writeError(failure, request_id_, keep_alive_);
    }
    co_return co_await relayResponse(std::move(connection), *parser, backend, rank);
}

awaitable<error_code> Relay::readBodyPiece(UpstreamConnection& connection,
                                           http::response_parser<http::buffer_body>& parser) {
    const size_t room = parser.get().body().size;
    error_code ec = parseBuffered(parser, connection.buffer);
    if (ec || parser.is_done() || parser.get().body().size != room) co_return ec;
    connection.stream.expires_after(ms(session_.worker().server().config().limits.stream_idle_timeout_ms));
    auto [read_ec, n] = co_await http::async_read_some(connection.stream, connection.buffer, parser, use_nothrow);
    co_return read_ec == http::error::need_buffer ? error_code{} : read_ec;
}

awaitable<bool> Relay::relayErrorAnswer(std::unique_ptr<UpstreamConnection> connection,
                                        http::response_parser<http::buffer_body>& parser, size_t backend) {
    Worker& worker = session_.worker();
    const std::string& backend_name = worker.server().backends().config(backend).name;
    auto& upstream = parser.get();
    const unsigned status = upstream.result_int();
    constexpr size_t kMaxErrorBytes = 64 * 1024;
    std::string body;
    char chunk[8192];
    while (!parser.is_done() && body.size() <= kMaxErrorBytes) {
        upstream.body().data = chunk;
        upstream.body().size = sizeof chunk;
        error_code ec = co_await readBodyPiece(*connection, parser);
        if (ec) {
            if (watch_->client_gone) co_return false;
            ApiError failure{502, "backend '" + backend_name + "' broke off its " + std::to_string(status) +
                                      " answer: " + ec.message() + ".",
                             "upstream_error", "", "backend_error"};
            co_return co_await session_.writeError(failure, request_id_, false);
        }
        body.append(chunk, sizeof chunk - upstream.body().size);
    }
    const bool whole = parser.is_done();
    http::response<http::string_body> response{upstream.result(), 11};
    response.set(http::field::content_type, "application/json");
    response.set("X-Request-ID", request_id_);
    response.set("X-Dpgate-Route", backend_name + "/" + std::to_string(record_.rank));
    if (auto retry = upstream.find(http::field::retry_after); retry != upstream.end())
        response.set(http::field::retry_after, retry->value());
    response.keep_alive(keep_alive_);
    response.body() = openAiErrorBody(status, whole ? std::string_view(body) : std::string_view(), backend_name,
                                      &record_.rejection);
    bool written = co_await session_.writeResponse(response);
    if (whole && parser.keep_alive() && connection->buffer.size() == 0 && !watch_->client_gone) {
        watch_->upstream = nullptr;
        worker.pool(backend).release(std::move(connection));
    }
    co_return written && keep_alive_;
}

awaitable<bool> Relay::relayResponse(std::unique_ptr<UpstreamConnection> connection,
                                     http::response_parser<http::buffer_body>& parser, size_t backend,
                                     uint32_t rank) {
    Worker& worker = session_.worker();
    const conf::LimitsConfig& limits = worker.server().config().limits;
    const std::string& backend_name = worker.server().backends().config(backend).name;
    auto& upstream = parser.get();
    ClientStream& client = session_.stream();
    metrics::GatewayMetrics& m = worker.server().metrics();
    Worker::SlotMetrics* slot_metrics = metrics_on_ ? &worker.slotMetrics(backend, rank) : nullptr;
    struct InflightGuard {
        metrics::Gauge* gauge;
        ~InflightGuard() {
            if (gauge) gauge->dec();
        }
    } inflight{slot_metrics ? slot_metrics->inflight : nullptr};
    if (inflight.gauge) inflight.gauge->inc();
    record_.backend = backend_name;
    record_.rank = int(rank);
    record_.status = upstream.result_int();
    // A non-stream answer comes when the work is done; a stream's prefill
    // ends with its first body byte (released below).
    const bool event_stream =
        beast::iequals(upstream[http::field::content_type].substr(0, 17), "text/event-stream");
    if (!event_stream) slot_load_.release();
    if (upstream.result_int() >= 400 && !event_stream)
        co_return co_await relayErrorAnswer(std::move(connection), parser, backend);

    ResponseFraming framing;
    {
        const bool no_body = upstream.result_int() == 204 || upstream.result_int() == 304;
        ResponseFraming::Body body = ResponseFraming::Body::chunked;
        uint64_t length = 0;
        if (no_body) {
            body = ResponseFraming::Body::none;
        } else if (!upstream.chunked() && parser.content_length()) {
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
        framing.start(upstream.base(), upstream.result_int(), body, length, keep_alive_, request_id_,
                      std::string_view(route, size_t(route_end - route)));
    }
    const bool chunked = framing.body() == ResponseFraming::Body::chunked;

    // Usage for the per-slot token counters: from the final usage event of a
    // stream, or from a (small) JSON answer. The usage chunk dpgate asked for
    // is cut out of a re-chunked stream (a Content-Length stream cannot
    // change length, so it is only observed).
    SseUsageParser stream_usage;
    const bool filter_usage = event_stream && stream_usage_added_ && chunked;
    std::string filtered;
    std::string answer_copy;
    constexpr size_t kAnswerCopyBytes = 1 << 20;
    auto first_byte = [&, recorded = false]() mutable {
        if (recorded) return;
        recorded = true;
        record_.ttfb_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        if (metrics_on_) m.time_to_first_byte_seconds.observe(record_.ttfb_seconds);
    };

    struct Buffer {
        Worker& worker;
        std::unique_ptr<char[]> data;
        ~Buffer() { worker.returnRelayBuffer(std::move(data)); }
    } chunk{worker, worker.takeRelayBuffer()};
    const size_t chunk_bytes = limits.relay_buffer_bytes;

    // The header goes out with the first piece of body (one write, and for a
    // small answer the whole response in one write), except for event
    // streams, whose header the client should see before the first token.
    if (event_stream || parser.is_done()) {
        if (parser.is_done()) session_.releaseKeySlot();  // the header is the whole answer
        client.expires_after(ms(limits.client_write_timeout_ms));
        auto [hec, hn] = co_await net::async_write(client, framing.next({}, parser.is_done()), use_nothrow);
        if (hec) {
            record_.status = 0;
            co_return false;  // the client left; `connection` closes with the upstream request
        }
        first_byte();
    }

    while (!parser.is_done()) {
        upstream.body().data = chunk.data.get();
        upstream.body().size = chunk_bytes;
        error_code rec = co_await readBodyPiece(*connection, parser);
        size_t got = chunk_bytes - upstream.body().size;
        if (rec) {
            if (watch_->client_gone) {
                if (metrics_on_) m.stream_aborts.with({"client"}).inc();
                co_return false;
            }
            const bool header_sent = framing.headSent();
            if (header_sent && metrics_on_) m.stream_aborts.with({"upstream"}).inc();
            std::string why = rec == beast::error::timeout
                                  ? "no data for " + std::to_string(limits.stream_idle_timeout_ms) + " ms"
                                  : rec.message();
            logLine(LogLevel::warn, "request " + request_id_ + ": upstream " + backend_name + " broke mid-response: " + why);
            if (!header_sent) {
                // Nothing reached the client yet: it gets a clean gateway error.
                ApiError failure{502, "backend '" + backend_name + "' broke off its response: " + why + ".",
                                 "upstream_error", "", "backend_error"};
                co_await session_.writeError(failure, request_id_, false);
                co_return false;
            }
            record_.rejection = "stream_interrupted";
            if (event_stream && chunked) {
                // The client must see a failure, not a stream that merely ends:
                // first what is held of an unfinished event, then the error.
                std::string event;
                if (filter_usage) stream_usage.finish(&event);
                if (!event.empty() && !event.ends_with("\n\n")) event.append("\n\n");
                event.append(sseErrorEvent("the upstream stream from backend '" + backend_name +
                                           "' broke before it completed: " + why + "."));
                client.expires_after(ms(limits.client_write_timeout_ms));
                co_await net::async_write(client, framing.next(event, false), use_nothrow);
                record_.bytes_out += event.size();
            }
            session_.close();
            co_return false;
        }
        if (got == 0) continue;
        slot_load_.release();
        std::string_view piece(chunk.data.get(), got);
        if (filter_usage) {
            filtered.clear();
            stream_usage.filter(piece, filtered);
            if (parser.is_done()) stream_usage.finish(&filtered);
            piece = filtered;
            // An unfinished event is held back; the last write below ends the body.
            if (piece.empty()) continue;
        } else if (event_stream) {
            stream_usage.observe(piece);
        } else if (answer_copy.size() + got <= kAnswerCopyBytes) {
            answer_copy.append(piece);
        }
        const bool last = parser.is_done();
        if (last) session_.releaseKeySlot();
        client.expires_after(ms(limits.client_write_timeout_ms));
        auto [wec, wn] = co_await net::async_write(client, framing.next(piece, last), use_nothrow);
        if (wec) {
            // The client left or stopped draining: drop the upstream too.
            if (metrics_on_) m.stream_aborts.with({"client"}).inc();
            co_return false;
        }
        record_.bytes_out += piece.size();
        first_byte();
    }

    error_code fec;
    if (!framing.finished()) {
        filtered.clear();
        if (filter_usage) stream_usage.finish(&filtered);
        session_.releaseKeySlot();
        const ResponseFraming::Buffers& tail = framing.next(filtered, true);
        if (!framing.empty()) {
            client.expires_after(ms(limits.client_write_timeout_ms));
            auto [ec, n] = co_await net::async_write(client, tail, use_nothrow);
            fec = ec;
            if (!fec) record_.bytes_out += filtered.size();
        }
    }

    first_byte();
    if (event_stream) {
        if (!filter_usage) stream_usage.finish();
        record_.usage = stream_usage.usage();
    } else {
        record_.usage = parseUsageJson(answer_copy);
    }
    if (record_.usage && checked_prompt_tokens_)
        record_.count_mismatch = worker.server().countCheck().compare(
            backend, rank, request_id_, *checked_prompt_tokens_, record_.usage->prompt_tokens);
    if (record_.usage && work_slot_ != SIZE_MAX) {
        // What the rank really computed replaces what was expected.
        const double computed = double(record_.usage->prompt_tokens) - double(record_.usage->cached_prompt_tokens);
        session_.worker().server().backends().workMeter().add(work_slot_, computed - work_charged_,
                                                               routing::meterSeconds(std::chrono::steady_clock::now()));
        work_charged_ = computed;
    }
    if (record_.usage && slot_metrics) {
        slot_metrics->prompt_tokens->inc(record_.usage->prompt_tokens);
        slot_metrics->cached_prompt_tokens->inc(record_.usage->cached_prompt_tokens);
        slot_metrics->completion_tokens->inc(record_.usage->completion_tokens);
    }

    if (parser.keep_alive() && connection->buffer.size() == 0 && !watch_->client_gone) {
        watch_->upstream = nullptr;
        worker.pool(backend).release(std::move(connection));
    }
    co_return !fec && keep_alive_;
}

}  // namespace dpgate::gateway
