// The operators' listener (separate port, loopback by default): status now;
// metrics, flip, drain and reload arrive with their issues.
#pragma once

#include "gateway/net.hpp"

namespace dpgate::gateway {

class Server;

class AdminListener {
public:
    AdminListener(net::io_context& io, Server& server);
    uint16_t listen(const tcp::endpoint& endpoint);
    void start();
    void stop();

private:
    awaitable<void> acceptLoop();
    awaitable<void> serve(tcp::socket socket);
    awaitable<http::response<http::string_body>> answer(const http::request<http::string_body>& request);
    http::response<http::string_body> status() const;
    awaitable<http::response<http::string_body>> flip(std::string_view target_name);
    http::response<http::string_body> drain(std::string_view name, bool drained);
    http::response<http::string_body> metricsPage() const;
    awaitable<http::response<http::string_body>> backendMetrics(std::string_view name);

    net::io_context& io_;
    Server& server_;
    tcp::acceptor acceptor_{io_};
};

}  // namespace dpgate::gateway
