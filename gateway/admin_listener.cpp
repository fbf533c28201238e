#include "gateway/admin_listener.hpp"

#include "gateway/api_error.hpp"
#include "gateway/server.hpp"

#include <nlohmann/json.hpp>

namespace dpgate::gateway {

AdminListener::AdminListener(net::io_context& io, Server& server) : io_(io), server_(server) {}

uint16_t AdminListener::listen(const tcp::endpoint& endpoint) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    return acceptor_.local_endpoint().port();
}

void AdminListener::start() { net::co_spawn(io_, acceptLoop(), net::detached); }

void AdminListener::stop() {
    error_code ec;
    acceptor_.close(ec);
}

awaitable<void> AdminListener::acceptLoop() {
    while (acceptor_.is_open()) {
        auto [ec, socket] = co_await acceptor_.async_accept(use_nothrow);
        if (ec) {
            if (ec == net::error::operation_aborted || !acceptor_.is_open()) break;
            continue;
        }
        net::co_spawn(io_, serve(std::move(socket)), net::detached);
    }
}

awaitable<void> AdminListener::serve(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    const conf::LimitsConfig& limits = server_.config().limits;
    while (true) {
        http::request_parser<http::string_body> parser;
        parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
        parser.body_limit(1024 * 1024);  // admin requests carry at most a small JSON body
        stream.expires_after(ms(limits.header_timeout_ms));
        auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_nothrow);
        if (ec) break;
        http::request<http::string_body> request = parser.release();
        http::response<http::string_body> response = answer(request);
        response.keep_alive(request.keep_alive());
        response.prepare_payload();
        stream.expires_after(ms(limits.client_write_timeout_ms));
        auto [wec, wn] = co_await http::async_write(stream, response, use_nothrow);
        if (wec || !response.keep_alive()) break;
    }
    error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

http::response<http::string_body> AdminListener::answer(const http::request<http::string_body>& request) {
    http::response<http::string_body> response{http::status::ok, 11};
    response.set(http::field::content_type, "application/json");
    std::string_view target = request.target();
    std::string_view path = target.substr(0, target.find('?'));
    if (request.method() == http::verb::get && path == "/admin/status") {
        const BackendRegistry& backends = server_.backends();
        nlohmann::json list = nlohmann::json::array();
        for (const BackendView& b : backends.snapshot())
            list.push_back({{"name", b.name},
                            {"role", conf::toString(b.role)},
                            {"healthy", b.healthy},
                            {"drained", b.drained},
                            {"window", b.reported_window},
                            {"model_ids", b.model_ids},
                            {"last_error", b.last_error}});
        nlohmann::json status = {{"model", server_.config().model.id},
                                 {"public_window", backends.publicWindow()},
                                 {"open_connections", server_.openConnections().load()},
                                 {"requests_in_flight", server_.requestsInFlight().load()},
                                 {"backends", std::move(list)}};
        response.body() = status.dump(2) + "\n";
        return response;
    }
    ApiError error{404, "no admin route for " + std::string(request.method_string()) + " " + std::string(path) + ".",
                   "invalid_request_error", "", "not_found"};
    response.result(error.status);
    response.body() = error.body();
    return response;
}

}  // namespace dpgate::gateway
