#include "gateway/client_session.hpp"

#include "admission/request_scan.hpp"
#include "gateway/auth/key_store.hpp"
#include "gateway/local_endpoints.hpp"
#include "gateway/log.hpp"
#include "gateway/parse_buffered.hpp"
#include "gateway/relay.hpp"
#include "gateway/request_framing.hpp"
#include "gateway/request_id.hpp"
#include "gateway/server.hpp"
#include "gateway/worker.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/string.hpp>

namespace dpgate::gateway {

ClientSession::ClientSession(Worker& worker, tcp::socket socket, std::shared_ptr<net::ssl::context> tls)
    : worker_(worker), stream_(worker.deadlines(), std::move(socket)), tls_(std::move(tls)) {
    error_code ec;
    auto endpoint = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_address_ = endpoint.address().to_string();
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
    net::co_spawn(io, [s = std::move(session)]() -> awaitable<void> { co_await s->run(); }, net::detached);
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
        ApiError error{400, "this port speaks TLS: use https://.", "invalid_request_error", "",
                       "plain_http_on_tls_port"};
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
    std::optional<http::request_parser<RequestBody>> parser;
    while (!worker_.stopping()) {
        if (co_await readRequest(parser) != ReadResult::request) break;
        ClientRequest request = parser->release();
        AccessRecord record;
        record.request_id = requestIdFor(request[beast::string_view("X-Request-ID")], worker_.random());
        record.method = request.method_string();
        record.path = request.target().substr(0, request.target().find('?'));
        record.bytes_in = request.body().size();
        record_ = &record;
        worker_.server().requestsInFlight().fetch_add(1, std::memory_order_relaxed);
        bool keep_alive = co_await handle(request, record);
        worker_.server().requestsInFlight().fetch_sub(1, std::memory_order_relaxed);
        record_ = nullptr;
        worker_.logAccess(record);
        idle_ = true;
        if (!keep_alive) break;
    }
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
}

awaitable<ClientSession::ReadResult> ClientSession::readRequest(
    std::optional<http::request_parser<RequestBody>>& parser) {
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
    size_t head_bytes = 0;
    while (true) {
        std::string_view bytes(static_cast<const char*>(buffer_.data().data()), buffer_.size());
        bool malformed = false;
        head_bytes = findHeaderEnd(bytes, malformed);
        if (malformed) {
            ApiError refusal{400, "malformed request header: bare LF line ending.", "invalid_request_error", "", "bad_request"};
            co_return co_await refuseRequest(refusal);
        }
        if (head_bytes != 0 && head_bytes <= limits.max_header_bytes) break;
        if (head_bytes > limits.max_header_bytes || buffer_.size() > limits.max_header_bytes) {
            ApiError refusal{431,
                             "request header exceeds " + std::to_string(limits.max_header_bytes) + " bytes.",
                             "invalid_request_error", "", "request_header_too_large"};
            co_return co_await refuseRequest(refusal);
        }
        auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(8192), use_nothrow);
        // A deadline closes the socket itself (beast::tcp_stream): the slow
        // client is cut without an answer, as nginx does on client_header_timeout.
        if (ec) co_return ReadResult::closed;
        buffer_.commit(n);
    }

    std::string_view head(static_cast<const char*>(buffer_.data().data()), head_bytes);
    FramingVerdict framing = checkRequestFraming(head, {limits.max_header_bytes, limits.max_header_count});
    if (!framing.ok()) {
        ApiError refusal{static_cast<unsigned>(framing.status), framing.message, "invalid_request_error", "",
                         framing.status == 431 ? "request_header_too_large" : "bad_request"};
        co_return co_await refuseRequest(refusal);
    }

    if (framing.has_content_length && framing.content_length > limits.max_body_bytes) {
        // Refused from the header alone, before a body byte is read.
        ApiError refusal{413,
                         "request body is " + std::to_string(framing.content_length) + " bytes; the limit is " +
                             std::to_string(limits.max_body_bytes) + " bytes.",
                         "invalid_request_error", "", "request_too_large"};
        co_return co_await refuseRequest(refusal);
    }

    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser->body_limit(limits.max_body_bytes);
    error_code ec;
    size_t used = parser->put(net::buffer(buffer_.data().data(), head_bytes), ec);
    if (ec || !parser->is_header_done()) {
        ApiError refusal{400, "malformed request header: " + ec.message() + ".", "invalid_request_error", "", "bad_request"};
        co_return co_await refuseRequest(refusal);
    }
    buffer_.consume(used);

    auto& req = parser->get();
    if (auto expect = req.find(http::field::expect); expect != req.end()) {
        if (!beast::iequals(expect->value(), "100-continue")) {
            ApiError refusal{417, "only Expect: 100-continue is supported.", "invalid_request_error", "", "bad_request"};
            co_return co_await refuseRequest(refusal);
        }
        if (!parser->is_done()) {
            stream_.expires_after(ms(limits.client_write_timeout_ms));
            static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            auto [wec, wn] = co_await net::async_write(stream_, net::buffer(kContinue), use_nothrow);
            if (wec) co_return ReadResult::closed;
        }
    }

    // The body grows as it arrives, with admission's padding (request_body.hpp).
    while (!parser->is_done()) {
        // What arrived with the header (or with the last read) first.
        error_code rec = parseBuffered(*parser, buffer_);
        if (!rec && !parser->is_done()) {
            stream_.expires_after(ms(limits.body_idle_timeout_ms));
            auto [read_ec, n] = co_await http::async_read_some(stream_, buffer_, *parser, use_nothrow);
            rec = read_ec;
        }
        if (rec == http::error::body_limit) {
            ApiError refusal{413,
                             "request body exceeds the limit of " + std::to_string(limits.max_body_bytes) + " bytes.",
                             "invalid_request_error", "", "request_too_large"};
            co_return co_await refuseRequest(refusal);
        }
        if (rec == http::error::end_of_stream || rec == net::error::eof || rec == beast::error::timeout)
            co_return ReadResult::closed;
        if (rec) {
            ApiError refusal{400, "malformed request body framing: " + rec.message() + ".", "invalid_request_error", "",
                             "bad_request"};
            co_return co_await refuseRequest(refusal);
        }
    }
    co_return ReadResult::request;
}

awaitable<ClientSession::ReadResult> ClientSession::refuseRequest(const ApiError& error) {
    http::response<http::string_body> response{static_cast<http::status>(error.status), 11};
    response.set(http::field::content_type, "application/json");
    response.set(http::field::connection, "close");
    response.body() = error.body();
    response.prepare_payload();
    stream_.expires_after(ms(worker_.server().config().limits.client_write_timeout_ms));
    co_await http::async_write(stream_, response, use_nothrow);
    // Refused before it was a request (framing, sizes): logged all the same.
    AccessRecord record;
    record.request_id = requestIdFor("", worker_.random());
    record.status = error.status;
    record.bytes_out = response.body().size();
    record.rejection = error.code;
    worker_.logAccess(record);
    // The unread rest of the request is discarded with the connection: the
    // client learns the verdict instead of a reset while it still sends.
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    co_return ReadResult::closed;
}

void ClientSession::releaseKeySlot() {
    if (key_limiter_) key_limiter_->release(key_slot_name_);
    key_limiter_.reset();
}

awaitable<bool> ClientSession::writeResponse(http::response<http::string_body>& response) {
    response.prepare_payload();
    releaseKeySlot();  // a complete answer: see releaseKeySlot()
    if (record_) {
        record_->status = response.result_int();
        record_->bytes_out = response.body().size();
    }
    stream_.expires_after(ms(worker_.server().config().limits.client_write_timeout_ms));
    auto [ec, n] = co_await http::async_write(stream_, response, use_nothrow);
    co_return !ec;
}

http::response<http::string_body> ClientSession::errorResponse(const ApiError& error, const std::string& request_id,
                                                                bool keep_alive) {
    http::response<http::string_body> response{static_cast<http::status>(error.status), 11};
    response.set(http::field::content_type, "application/json");
    response.set("X-Request-ID", request_id);
    response.keep_alive(keep_alive);
    response.body() = error.body();
    return response;
}

awaitable<bool> ClientSession::writeError(const ApiError& error, const std::string& request_id, bool keep_alive) {
    http::response<http::string_body> response = errorResponse(error, request_id, keep_alive);
    if (record_) record_->rejection = error.code;
    co_return co_await writeResponse(response) && keep_alive;
}

awaitable<bool> ClientSession::handle(ClientRequest& request, AccessRecord& record) {
    const std::string& request_id = record.request_id;
    Server& server = worker_.server();
    bool keep_alive = request.keep_alive() && !worker_.stopping();
    std::string_view target = request.target();
    std::string_view path = target.substr(0, target.find('?'));
    bool is_get = request.method() == http::verb::get;

    // The OpenAI API needs a key; /health answers monitors without one.
    std::optional<auth::KeyInfo> key;
    if (path.starts_with("/v1/")) {
        std::string_view authorization = request[http::field::authorization];
        std::shared_ptr<const auth::KeyStore> keys = server.keys();
        key = keys->authenticate(authorization);
        if (key) {
            record.key_name = key->name;
            record.key_hash = key->hash_prefix;
        }
        if (!key && (keys->required() || !authorization.empty())) {
            ApiError error{401,
                           authorization.empty()
                               ? "You didn't provide an API key: send it as 'Authorization: Bearer <key>'."
                               : "Incorrect API key provided.",
                           "invalid_request_error", "", "invalid_api_key"};
            http::response<http::string_body> response = errorResponse(error, request_id, keep_alive);
            response.set(http::field::www_authenticate, "Bearer");
            record.rejection = error.code;
            co_return co_await writeResponse(response) && keep_alive;
        }
    }

    if (path == "/v1/chat/completions" || path == "/v1/completions") {
        if (request.method() != http::verb::post) {
            ApiError error{405, "use POST for " + std::string(path) + ".", "invalid_request_error", "",
                           "method_not_allowed"};
            co_return co_await writeError(error, request_id, keep_alive);
        }
        // Per-key limits; the slot is held until the answer is relayed.
        struct ReleaseKeySlot {
            ClientSession& session;
            ~ReleaseKeySlot() { session.releaseKeySlot(); }
        } release_key_slot{*this};
        if (key) {
            uint64_t now_ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now().time_since_epoch())
                                           .count());
            std::shared_ptr<auth::KeyLimiter> limiter = server.keyLimiter();
            auth::RateDecision admission = limiter->tryAcquire(key->name, now_ms);
            if (!admission.allowed) {
                ApiError error{429, "Rate limit reached for key '" + key->name + "': " + std::string(admission.reason) + ".",
                               "rate_limit_error", "", "rate_limit_exceeded"};
                http::response<http::string_body> response = errorResponse(error, request_id, keep_alive);
                response.set(http::field::retry_after, std::to_string(admission.retry_after_seconds));
                record.rejection = error.code;
                co_return co_await writeResponse(response) && keep_alive;
            }
            key_limiter_ = std::move(limiter);
            key_slot_name_ = key->name;
        }
        Relay relay(*this, request, record, keep_alive, key ? &*key : nullptr);
        co_return co_await relay.run();
    }

    http::response<http::string_body> response{http::status::ok, 11};
    response.set(http::field::content_type, "application/json");
    response.set("X-Request-ID", request_id);
    response.keep_alive(keep_alive);
    if (is_get && path == "/health") {
        auto [status, body] = healthBody(server.backends());
        response.result(status);
        response.body() = std::move(body);
    } else if (is_get && path == "/v1/models") {
        response.body() = modelsBody(server.config().model, server.backends().publicWindow());
    } else if (path == "/health" || path == "/v1/models") {
        ApiError error{405, "use GET for " + std::string(path) + ".", "invalid_request_error", "",
                                       "method_not_allowed"};
        co_return co_await writeError(error, request_id, keep_alive);
    } else {
        ApiError error{404, "no route for " + std::string(request.method_string()) + " " +
                                                std::string(path) + "; dpgate serves /v1/chat/completions, "
                                                "/v1/completions, /v1/models and /health.",
                                       "invalid_request_error", "", "not_found"};
        co_return co_await writeError(error, request_id, keep_alive);
    }
    co_return co_await writeResponse(response) && keep_alive;
}

}  // namespace dpgate::gateway
