#include "gateway/client_session.hpp"

#include "gateway/in_flight.hpp"
#include "gateway/log.hpp"
#include "gateway/request_id.hpp"
#include "gateway/request_path.hpp"
#include "gateway/server.hpp"
#include "gateway/worker.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/string.hpp>

namespace dpgate::gateway {
namespace {

// Body reads: large enough that a 100 MB upload is not a million reads.
constexpr size_t kBodyReadBytes = 64 * 1024;

std::string_view bytesOf(const beast::flat_buffer& buffer) {
    return {static_cast<const char*>(buffer.data().data()), buffer.size()};
}

ApiError refusalOf(const RequestRefusal& refusal) {
    switch (refusal.status) {
        case 413: return ApiError::payloadTooLarge(refusal.message);
        case 431: return ApiError::headerTooLarge(refusal.message);
        default: return ApiError::badRequest(refusal.message);
    }
}

}  // namespace

ClientSession::ClientSession(Worker& worker, tcp::socket socket, const tcp::endpoint& peer,
                             std::shared_ptr<net::ssl::context> tls)
    : worker_(worker),
      stream_(worker.deadlines(), std::move(socket)),
      tls_(std::move(tls)),
      peer_address_(peer.address().to_string()) {
    error_code ec;
    stream_.socket().set_option(tcp::no_delay(true), ec);
    worker_.attach(this);
    worker_.server().openConnections().fetch_add(1, std::memory_order_relaxed);
}

ClientSession::~ClientSession() {
    worker_.detach(this);
    worker_.server().openConnections().fetch_sub(1, std::memory_order_relaxed);
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
    if (idle_) close();
}

void ClientSession::close() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
}

awaitable<bool> ClientSession::startTls() {
    const conf::LimitsConfig& limits = worker_.server().config().limits;
    // The handshake runs under the header deadline: a client that opens a
    // connection and dribbles its ClientHello is cut like a slow header.
    stream_.expires_after(ms(limits.header_timeout_ms));
    auto [ec, is_tls] = co_await beast::async_detect_ssl(stream_.tcpStream(), buffer_, use_nothrow);
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
        error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
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
    if (tls_ && !co_await startTls()) co_return;
    std::optional<ClientRequestParser> parser;
    while (!worker_.stopping()) {
        if (co_await readRequest(parser) != ReadResult::request) break;
        ClientRequest request = parser->release();
        const bool keep_alive = co_await serve(request);
        idle_ = true;
        if (!keep_alive) break;
    }
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
}

awaitable<ClientSession::ReadResult> ClientSession::readRequest(std::optional<ClientRequestParser>& parser) {
    const conf::LimitsConfig& limits = worker_.server().config().limits;
    idle_ = true;

    // Between requests the keep-alive deadline runs; from the first byte on,
    // one deadline covers the whole header, however it is dribbled.
    if (buffer_.size() == 0) {
        stream_.expires_after(ms(limits.keepalive_timeout_ms));
        auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(4096), use_nothrow);
        if (ec) co_return ReadResult::closed;
        buffer_.commit(n);
    }
    idle_ = false;
    stream_.expires_after(ms(limits.header_timeout_ms));
    parser.emplace(RequestLimits{limits.max_header_bytes, limits.max_header_count, limits.max_body_bytes});
    // The head, and whatever of the body came with it.
    while (true) {
        buffer_.consume(parser->put(bytesOf(buffer_)));
        if (parser->failed()) co_return co_await refuseRequest(refusalOf(parser->refusal()));
        if (parser->is_header_done()) break;
        auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(8192), use_nothrow);
        // A deadline closes the socket itself (the worker's sweep, timed_socket.hpp): the slow
        // client is cut without an answer, as nginx does on client_header_timeout.
        if (ec) co_return ReadResult::closed;
        buffer_.commit(n);
    }

    if (parser->fields().has(http::field::expect)) {
        const std::string_view expect = parser->fields()[http::field::expect];
        if (!beast::iequals(beast::string_view(expect), "100-continue")) {
            ApiError refusal = ApiError::expectationFailed("only Expect: 100-continue is supported.");
            co_return co_await refuseRequest(refusal);
        }
        if (!parser->is_done()) {
            stream_.expires_after(ms(limits.client_write_timeout_ms));
            static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            auto [wec, wn] = co_await net::async_write(stream_, net::buffer(kContinue), use_nothrow);
            if (wec) co_return ReadResult::closed;
        }
    }

    // The body grows as it arrives, with admission's padding (client_request.hpp).
    while (!parser->is_done()) {
        stream_.expires_after(ms(limits.body_idle_timeout_ms));
        auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(kBodyReadBytes), use_nothrow);
        if (ec) co_return ReadResult::closed;
        buffer_.commit(n);
        buffer_.consume(parser->put(bytesOf(buffer_)));
        if (parser->failed()) co_return co_await refuseRequest(refusalOf(parser->refusal()));
    }
    co_return ReadResult::request;
}

awaitable<ClientSession::ReadResult> ClientSession::refuseRequest(const ApiError& error) {
    http::response<http::string_body> response{static_cast<http::status>(error.http_status), 11};
    response.set(http::field::content_type, "application/json");
    response.set(http::field::connection, "close");
    response.body() = error.body();
    response.prepare_payload();
    stream_.expires_after(ms(worker_.server().config().limits.client_write_timeout_ms));
    co_await http::async_write(stream_, response, use_nothrow);
    // Refused before it was a request (framing, sizes): logged all the same.
    AccessRecord record;
    assignRequestId(record.request_id, "", worker_.requestIds());
    record.status = error.http_status;
    record.bytes_out = response.body().size();
    record.rejection = error.code;
    worker_.logAccess(record);
    // The unread rest of the request is discarded with the connection: the
    // client learns the verdict instead of a reset while it still sends.
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    co_return ReadResult::closed;
}

awaitable<bool> ClientSession::serve(ClientRequest& request) {
    AccessRecord& record = record_;
    record.reset();
    assignRequestId(record.request_id, request[beast::string_view("X-Request-ID")], worker_.requestIds());
    record.method.assign(clipUtf8(request.method_string(), 32));
    record.path.assign(clipUtf8(request.target().substr(0, request.target().find('?')), 2048));
    record.bytes_in = request.body().size();
    InFlight in_flight(worker_.server().requestsInFlight());
    Server& server = worker_.server();
    const conf::Config& config = server.config();
    bool keep_alive = false;
    bool failed = false;
    std::string failure;
    try {
        RequestContext context{*this,
                               worker_,
                               server,
                               config,
                               request,
                               record,
                               request.keep_alive() && !worker_.stopping(),
                               config.metrics.enabled ? &server.metrics() : nullptr,
                               std::nullopt,
                               auth::KeyLease()};
        request_ = &context;
        keep_alive = co_await serveRequest(context);
    } catch (const std::exception& e) {
        failed = true;
        failure = e.what();
    } catch (...) {
        failed = true;
        failure = "unknown exception";
    }
    request_ = nullptr;
    if (failed) keep_alive = co_await answerInternalError(record, config, failure);
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
    record.status = 500;
    record.bytes_out = response.body().size();
    stream_.expires_after(ms(config.limits.client_write_timeout_ms));
    co_await http::async_write(stream_, response, use_nothrow);
    co_return false;
}

awaitable<bool> ClientSession::writeResponse(http::response<http::string_body>& response) {
    response.prepare_payload();
    // The request's own config when there is one (one snapshot per request).
    const conf::Config& config = request_ ? request_->config : worker_.server().config();
    if (request_) {
        request_->key_lease.release();  // a complete answer: see KeyLease
        request_->record.status = response.result_int();
        request_->record.bytes_out = response.body().size();
    }
    stream_.expires_after(ms(config.limits.client_write_timeout_ms));
    auto [ec, n] = co_await http::async_write(stream_, response, use_nothrow);
    co_return !ec;
}

awaitable<bool> ClientSession::writeError(const ApiError& error, bool keep_alive, http::field extra,
                                          std::string_view extra_value) {
    http::response<http::string_body> response{static_cast<http::status>(error.http_status), 11};
    response.set(http::field::content_type, "application/json");
    if (request_) {
        response.set("X-Request-ID", request_->record.request_id);
        request_->record.rejection = error.code;
    }
    if (extra != http::field::unknown) response.set(extra, extra_value);
    response.keep_alive(keep_alive);
    response.body() = error.body();
    co_return (co_await writeResponse(response) && keep_alive);
}

}  // namespace dpgate::gateway
