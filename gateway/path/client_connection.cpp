#include "gateway/path/client_connection.hpp"

#include <boost/asio/write.hpp>

namespace dpgate::gateway {
namespace {

// Body reads: large enough that a 100 MB upload is not a million reads.
constexpr size_t kBodyReadBytes = 64 * 1024;
// Retry-After on a 503 for the buffered-body budget: bodies in memory are
// forwarded and freed within seconds.
constexpr std::string_view kBudgetRetryAfterSeconds = "1";

}  // namespace

std::string_view ClientConnection::bufferedBytes() const {
    return {static_cast<const char*>(buffer_.data().data()), buffer_.size()};
}

ApiError ClientConnection::refusalOf(const RequestRefusal& refusal) {
    switch (refusal.status) {
        case 413: return ApiError::payloadTooLarge(refusal.message);
        case 431: return ApiError::headerTooLarge(refusal.message);
        case 503: return ApiError::unavailable(refusal.message, "overloaded", "server_error");
        default: return ApiError::badRequest(refusal.message);
    }
}

ClientConnection::ClientConnection(DeadlineList& deadlines, tcp::socket socket, const tcp::endpoint& peer,
                                   std::shared_ptr<net::ssl::context> tls)
    : stream_(deadlines, std::move(socket)), tls_(std::move(tls)), peer_address_(peer.address().to_string()) {
    error_code ec;
    stream_.socket().set_option(tcp::no_delay(true), ec);
}

void ClientConnection::close() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
}

bool ClientConnection::takeBody() {
    ClientRequestParser& parser = *parser_;
    if (parser.is_done()) return true;
    // Even with nothing buffered: the body's share of the budget is taken here.
    buffer_.consume(parser.put(bufferedBytes()));
    return parser.is_done();
}

awaitable<ClientConnection::BodyRead> ClientConnection::readBody(const conf::LimitsConfig& limits) {
    ClientRequestParser& parser = *parser_;
    BodyRead read;
    // Sent only now: after the checks of the head and the budget passed.
    if (expects_continue_ && !parser.failed() && !parser.is_done()) {
        stream_.expires_after(ms(limits.client_write_timeout_ms));
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        auto [wec, wn] = co_await net::async_write(stream_, net::buffer(kContinue), use_nothrow);
        if (wec) co_return read;  // gone before the body began
    }
    // The body grows as it arrives, with admission's padding (client_request.hpp).
    while (!parser.failed() && !parser.is_done()) {
        stream_.expires_after(ms(limits.body_idle_timeout_ms));
        auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(kBodyReadBytes), use_nothrow);
        if (ec) {
            read.gone = ec == beast::error::timeout ? "body_timeout" : "client_closed";
            co_return read;
        }
        buffer_.commit(n);
        buffer_.consume(parser.put(bufferedBytes()));
    }
    if (!parser.failed()) {
        read.complete = true;
        co_return read;
    }
    read.refusal = refusalOf(parser.refusal());
    if (parser.refusal().status == 503) read.retry_after = kBudgetRetryAfterSeconds;
    co_return read;
}

void ClientConnection::dropBufferedBody() {
    ClientRequestParser& parser = *parser_;
    if (parser.failed() || parser.is_done()) return;
    parser.discardBody();
    buffer_.consume(parser.put(bufferedBytes()));
}

awaitable<ClientConnection::Written> ClientConnection::writeResponse(http::response<http::string_body>& response,
                                                                     const conf::LimitsConfig& limits) {
    if (!parser_->is_done()) {
        dropBufferedBody();
        if (!parser_->is_done()) response.keep_alive(false);
    }
    response.prepare_payload();
    const bool head_only = parser_->get().method() == http::verb::head;
    Written written;
    written.body_bytes = head_only ? 0 : response.body().size();
    written.ok = co_await send(response, head_only, limits.client_write_timeout_ms);
    co_return written;
}

awaitable<bool> ClientConnection::send(http::response<http::string_body>& response, bool head_only,
                                       uint64_t write_timeout_ms) {
    stream_.expires_after(ms(write_timeout_ms));
    if (head_only) {
        // The head says what GET would send (Content-Length); RFC 9110 9.3.2.
        http::response_serializer<http::string_body> serializer(response);
        auto [ec, n] = co_await http::async_write_header(stream_, serializer, use_nothrow);
        co_return !ec;
    }
    auto [ec, n] = co_await http::async_write(stream_, response, use_nothrow);
    co_return !ec;
}

}  // namespace dpgate::gateway
