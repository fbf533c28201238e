#include "gateway/process/client_session.hpp"

#include "gateway/metrics/in_flight.hpp"
#include "gateway/net/lingering_close.hpp"
#include "gateway/path/path_parts.hpp"
#include "gateway/path/request_id.hpp"
#include "gateway/path/request_path.hpp"
#include "gateway/platform/heap_pages.hpp"
#include "gateway/platform/log.hpp"
#include "gateway/process/server.hpp"
#include "gateway/process/worker.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/string.hpp>

namespace dpgate::gateway {
namespace {

// A head's first read; its later ones.
constexpr size_t kFirstHeadReadBytes = 4096;
constexpr size_t kHeadReadBytes = 8192;
// What the read buffer may keep between requests: a body read grows it to
// 64 KiB and more, and ten thousand idle connections must not each keep that.
constexpr size_t kIdleBufferBytes = 16 * 1024;
// A body whose buffer reached this (the parser's first reservation, so a
// body that grew past it) has its freed memory handed back to the system.
constexpr size_t kReturnMemoryAfterBytes = ClientRequestParser::kFirstReserveBytes;
}  // namespace

ClientSession::ClientSession(Worker& worker, tcp::socket socket, const tcp::endpoint& peer,
                             std::shared_ptr<net::ssl::context> tls, ConnectionsPerAddress::Slot address_slot)
    : ClientConnection(worker.deadlines(), std::move(socket), peer, std::move(tls)),
      worker_(worker),
      address_slot_(std::move(address_slot)) {
    worker_.attach(this);
    worker_.server().connectionCount().fetch_add(1, std::memory_order_relaxed);
}

ClientSession::~ClientSession() {
    worker_.detach(this);
    worker_.server().connectionCount().fetch_sub(1, std::memory_order_relaxed);
}

void ClientSession::start(std::shared_ptr<ClientSession> session) {
    net::io_context& io = session->worker_.io();
    // run() answers every exception of a request itself; one that escapes
    // the session (a failed answer to it, say) is logged, never dropped.
    net::co_spawn(
        io, [s = std::move(session)]() -> awaitable<void> { co_await s->run(); },
        [](std::exception_ptr failure) {
            if (!failure) return;
            try {
                std::rethrow_exception(failure);
            } catch (const std::exception& e) {
                logLine(LogLevel::error, std::string("client session ended by an exception: ") + e.what());
            } catch (...) {
                logLine(LogLevel::error, "client session ended by an unknown exception");
            }
        });
}

void ClientSession::closeIfIdle() {
    if (idle_.linked) close();
}

awaitable<bool> ClientSession::startTls() {
    const conf::LimitsConfig& limits = worker_.server().config().limits;
    // The handshake runs under the header deadline: a client that opens a
    // connection and dribbles its ClientHello is cut like a slow header.
    stream_.expires_after(ms(limits.header_timeout_ms));
    worker_.markIdle(*this);  // until its first bytes, as a plain connection (readHead)
    auto [ec, is_tls] = co_await beast::async_detect_ssl(stream_.tcpStream(), buffer_, use_nothrow);
    worker_.markBusy(*this);
    if (ec) co_return false;
    if (!is_tls) {
        const ApiError error = ApiError::badRequest("this port speaks TLS: use https://.", "plain_http_on_tls_port");
        http::response<http::string_body> response{http::status::bad_request, 11};
        response.set(http::field::content_type, "application/json");
        response.set(http::field::connection, "close");
        response.body() = error.body();
        response.prepare_payload();
        stream_.expires_after(ms(limits.client_write_timeout_ms));
        co_await http::async_write(stream_.tcpStream(), response, use_nothrow);
        co_await lingeringClose();
        co_return false;
    }
    ClientStream::TlsStream& tls = stream_.startTls(*tls_);
    const auto buffered = buffer_.data();  // the ClientHello bytes detection already read
    auto [hec, used] = co_await tls.async_handshake(net::ssl::stream_base::server, buffered, use_nothrow);
    if (hec) {
        logLine(LogLevel::debug, "TLS handshake from " + peer_address_ + " failed: " + hec.message());
        co_return false;
    }
    buffer_.consume(used);
    co_return true;
}

awaitable<void> ClientSession::run() {
    // One statement per await: GCC 12 miscompiles a co_await inside a condition.
    if (tls_) {
        const bool started = co_await startTls();
        if (!started) co_return;
    }
    while (!worker_.stopping()) {
        const ReadResult read = co_await readHead();
        if (read != ReadResult::request) break;
        const bool keep_alive = co_await serve(parser_->request());
        const bool body_read = parser_->is_done();
        endRequest();
        if (!body_read) {
            co_await lingeringClose();
            co_return;
        }
        if (!keep_alive) break;
    }
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
}

awaitable<ClientSession::ReadResult> ClientSession::readHead() {
    Server& server = worker_.server();
    const conf::LimitsConfig& limits = server.config().limits;
    if (buffer_.size() == 0) {
        // Idle until the first byte: the first to close at max_connections, and at shutdown.
        worker_.markIdle(*this);
        stream_.expires_after(ms(heads_read_ == 0 ? limits.header_timeout_ms : limits.keepalive_timeout_ms));
        auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(kFirstHeadReadBytes), use_nothrow);
        worker_.markBusy(*this);
        if (ec) co_return ReadResult::closed;
        buffer_.commit(n);
    }
    ++heads_read_;
    stream_.expires_after(ms(limits.header_timeout_ms));
    parser_.emplace(RequestLimits{limits.max_header_bytes, limits.max_header_count, limits.max_body_bytes,
                                  &server.bodyBudget(), limits.max_buffered_body_bytes});
    // The head only: the body is the request path's to read, once the head has earned it.
    while (true) {
        buffer_.consume(parser_->put(bufferedBytes()));
        if (parser_->failed()) {
            const ApiError refusal = refusalOf(parser_->refusal());
            co_return co_await refuseRequest(refusal);
        }
        if (parser_->is_header_done()) break;
        auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(kHeadReadBytes), use_nothrow);
        // A deadline closes the socket itself (the worker's sweep, timed_socket.hpp): the slow
        // client is cut without an answer, as nginx does on client_header_timeout.
        if (ec) co_return ReadResult::closed;
        buffer_.commit(n);
    }

    expects_continue_ = false;
    if (parser_->fields().has(http::field::expect)) {
        const std::string_view expect = parser_->fields()[http::field::expect];
        if (!beast::iequals(beast::string_view(expect), "100-continue")) {
            ApiError refusal = ApiError::expectationFailed("only Expect: 100-continue is supported.");
            co_return co_await refuseRequest(refusal);
        }
        expects_continue_ = true;
    }
    co_return ReadResult::request;
}

awaitable<ClientSession::ReadResult> ClientSession::refuseRequest(const ApiError& error) {
    http::response<http::string_body> response{static_cast<http::status>(error.http_status), 11};
    response.set(http::field::content_type, "application/json");
    response.set(http::field::connection, "close");
    response.body() = error.body();
    response.prepare_payload();
    const bool head_only = parser_ && parser_->is_header_done() && parser_->get().method() == http::verb::head;
    co_await send(response, head_only, worker_.server().config().limits.client_write_timeout_ms);
    // Refused before it was a request (framing, sizes): logged all the same.
    AccessRecord record;
    assignRequestId(record.request_id, "", worker_.requestIds());
    record.status = error.http_status;
    record.bytes_out = head_only ? 0 : response.body().size();
    record.rejection = error.code;
    worker_.logAccess(record);
    parser_.reset();
    co_await lingeringClose();
    co_return ReadResult::closed;
}

awaitable<void> ClientSession::lingeringClose() {
    if (!stream_.socket().is_open()) co_return;
    worker_.markIdle(*this);  // the first to go at max_connections
    TimedSocket& tcp = stream_.tcpStream();
    // Asio's own reads: the client's close must end the wait even when it
    // came with the last bytes of a short read (drain_aware_read.hpp). Raw
    // bytes, TLS or not: they are dropped unread.
    tcp.readDrainAwareChecked(false);
    buffer_.clear();
    constexpr size_t kLingerReadBytes = 16 * 1024;
    const net::mutable_buffer scratch = buffer_.prepare(kLingerReadBytes);
    const std::chrono::milliseconds linger = ms(worker_.server().config().limits.linger_timeout_ms);
    co_await gateway::lingeringClose(tcp, scratch, linger);
    worker_.markBusy(*this);
}

void ClientSession::endRequest() {
    const size_t body_bytes = parser_->get().body().capacity();
    parser_.reset();
    if (buffer_.size() == 0 && buffer_.capacity() > kIdleBufferBytes) buffer_.shrink_to_fit();
    if (body_bytes >= kReturnMemoryAfterBytes) returnFreeMemory();
}

awaitable<bool> ClientSession::serve(ClientRequest& request) {
    AccessRecord& record = record_;
    record.reset();
    assignRequestId(record.request_id, request[beast::string_view("X-Request-ID")], worker_.requestIds());
    record.method.assign(clipUtf8(request.method_string(), 32));
    record.path.assign(clipUtf8(request.target().substr(0, request.target().find('?')), 2048));
    InFlight in_flight(worker_.server().requestCount());
    Server& server = worker_.server();
    const conf::Config& config = server.config();
    bool keep_alive = false;
    bool failed = false;
    std::string failure;
    try {
        RequestContext context{*this,
                               worker_.pathShared(),
                               worker_.pathLocal(),
                               config,
                               request,
                               record,
                               request.keep_alive() && !worker_.stopping(),
                               config.metrics.enabled ? &server.metrics() : nullptr,
                               std::nullopt,
                               auth::KeyLease()};
        keep_alive = co_await serveRequest(context);
    } catch (const std::exception& e) {
        failed = true;
        failure = e.what();
    } catch (...) {
        failed = true;
        failure = "unknown exception";
    }
    if (failed) keep_alive = co_await answerInternalError(record, config, failure);
    record.bytes_in = request.body().size();
    worker_.logAccess(record);
    co_return keep_alive;
}

awaitable<bool> ClientSession::answerInternalError(AccessRecord& record, const conf::Config& config,
                                                   const std::string& what) {
    logLine(LogLevel::error, "request " + record.request_id + ": internal error: " + what);
    if (config.metrics.enabled) worker_.server().metrics().internal_errors.inc();
    record.rejection = "internal_error";
    if (record.status != 0) {
        // The answer had begun: the client learns of the failure from the
        // connection closing before the answer is complete.
        close();
        co_return false;
    }
    const ApiError error = ApiError::internal("dpgate failed to answer this request (request " + record.request_id +
                                              "); the failure is logged.");
    http::response<http::string_body> response{http::status::internal_server_error, 11};
    response.set(http::field::content_type, "application/json");
    response.set("X-Request-ID", record.request_id);
    response.keep_alive(false);
    response.body() = error.body();
    response.prepare_payload();
    const bool head_only = parser_->get().method() == http::verb::head;
    record.status = 500;
    record.bytes_out = head_only ? 0 : response.body().size();
    co_await send(response, head_only, config.limits.client_write_timeout_ms);
    co_return false;
}

}  // namespace dpgate::gateway
