#include "gateway/path/upstream_exchange.hpp"

#include "gateway/backends/backend_registry.hpp"
#include "gateway/http/forwarded_headers.hpp"
#include "gateway/http/head_writer.hpp"
#include "gateway/http/parse_buffered.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/net/write_now.hpp"
#include "gateway/path/client_watch.hpp"
#include "gateway/path/path_parts.hpp"
#include "gateway/platform/string_pool.hpp"

#include <boost/beast/core/string.hpp>

#include <cstdlib>

namespace dpgate::gateway {

using namespace std::string_view_literals;

namespace {

bool isConnectionDrop(const error_code& ec) {
    return ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
           ec == net::error::broken_pipe || ec == net::error::connection_aborted;
}

enum class Attempt { ok, retry_fresh, failed };

}  // namespace

UpstreamExchange::UpstreamExchange(const Request& request, const conf::LimitsConfig& limits, BackendRegistry& backends,
                                   PathLocal& local, metrics::GatewayMetrics* metrics, ClientWatch& watch)
    : request_(request),
      limits_(limits),
      backends_(backends),
      local_(local),
      metrics_(metrics),
      watch_(watch),
      head_(StringPool::take()) {}

UpstreamExchange::~UpstreamExchange() {
    watch_.follow(nullptr);
    StringPool::give(std::move(head_));
}

void UpstreamExchange::buildRequest(size_t backend, uint32_t rank) {
    const conf::BackendConfig& config = backends_.config(backend);
    const ClientRequest& request = request_.request;
    const admission::Admitted& admitted = request_.admitted;
    const std::string& body = request.body();
    splice_.clear();
    if (admitted.inserted_max_tokens) splice_.append(admitted.splice_text);
    if (request_.stream_usage_added) splice_.append(R"("stream_options":{"include_usage":true},)"sv);
    const size_t body_bytes = body.size() + splice_.size();

    std::string& h = head_;
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
    const std::string_view peer = request_.peer;
    {
        HeadWriter w(h, 160 + forwarded_for.size() + peer.size() + request_.request_id.size());
        w.put("X-Forwarded-For: "sv);
        if (!forwarded_for.empty()) w.put(forwarded_for).put(", "sv);
        w.put(peer).put("\r\nX-Request-ID: "sv).put(request_.request_id);
        w.put("\r\nX-data-parallel-rank: "sv).put(uint64_t(rank)).put("\r\n"sv);
        if (!config.credential_env.empty())
            if (const char* token = std::getenv(config.credential_env.c_str()))
                w.put("Authorization: Bearer "sv).put(token).put("\r\n"sv);
        w.put("Content-Length: "sv).put(uint64_t(body_bytes)).put("\r\n\r\n"sv);
    }  // h now ends after the head

    if (!splice_.empty()) {
        buffers_ = {net::buffer(h), net::buffer(body.data(), admitted.splice_offset), net::buffer(splice_),
                    net::buffer(body.data() + admitted.splice_offset, body.size() - admitted.splice_offset)};
    } else {
        buffers_ = {net::buffer(h), net::buffer(body), net::const_buffer(), net::const_buffer()};
    }
}

awaitable<UpstreamAnswer> UpstreamExchange::send(const SlotLease& slot) {
    watch_.follow(nullptr);
    connection_.reset();
    buildRequest(slot.backend(), slot.rank());
    UpstreamPool& pool = local_.pool(slot.backend());
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
    for (int stale = 0; connection_ && stale < 2; ++stale) {
        // One exchange: the request written, the answer's head read and
        // parsed (here, not in a coroutine of its own: one frame fewer per
        // request). The parser has no body window yet, so parsing stops after
        // the head and body bytes stay in connection.buffer.
        watch_.follow(connection_.get());
        UpstreamConnection& connection = *connection_;
        UpstreamResponseParser& parser = connection.answer.emplace();
        Attempt outcome = Attempt::ok;
        error_code rec;
        // The head is read drain-aware, with the end checked (timed_socket.hpp):
        // when the answer ends with a short read, the reactor then knows the
        // socket was drained there, and the pool tells without a system call
        // whether the backend sent anything after it (upstream_pool.cpp). A
        // backend that closes right after part of a head is seen at the next
        // recheck, within a second, instead of at once.
        connection.stream.readDrainAwareChecked(true);
        if (WriteNow now(&connection.stream.socket(), buffers_); !now.done()) {
            connection.stream.expires_after(ms(limits_.stream_idle_timeout_ms));
            rec = co_await writeRest(connection.stream, now);
        } else {
            connection.stream.waitBeforeNextRead();  // written whole, here and now
        }
        if (!rec) connection.stream.expires_after(ms(limits_.upstream_first_byte_timeout_ms));
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
        watch_.follow(nullptr);
        connection_.reset();
        if (outcome == Attempt::retry_fresh && !watch_.clientGone()) {
            auto [fec, fresh] = co_await pool.connect();
            error = fec;
            connection_ = std::move(fresh);
        }
    }
    UpstreamAnswer answer;
    if (watch_.clientGone()) {
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

awaitable<error_code> UpstreamExchange::readBodyPiece() {
    UpstreamConnection& connection = *connection_;
    UpstreamResponseParser& parser = *connection.answer;
    const size_t room = parser.body().size;
    error_code ec = parseBuffered(parser, connection.buffer);
    if (ec || parser.is_done() || parser.body().size != room) co_return ec;
    connection.stream.expires_after(ms(limits_.stream_idle_timeout_ms));
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

void UpstreamExchange::release(size_t backend, bool whole) {
    if (!connection_ || !whole || !connection_->answer->keep_alive()) return;
    if (connection_->buffer.size() != 0) {
        // More than the answer came: whatever it is, it answers no request
        // this connection would carry next.
        countDropped(backend, "bytes_after_answer", 1);
        return;
    }
    if (watch_.clientGone()) return;
    watch_.follow(nullptr);
    connection_->answer.reset();
    local_.pool(backend).release(std::move(connection_));
}

void UpstreamExchange::countDropped(size_t backend, const char* reason, uint32_t n) const {
    if (metrics_) metrics_->upstream_dropped.with({backends_.config(backend).name, reason}).inc(n);
}

}  // namespace dpgate::gateway
