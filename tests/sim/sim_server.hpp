#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "sim_context.hpp"

namespace dpgate::sim {

// The listening socket and its accept loop; each accepted connection gets its
// own strand and an HttpSession coroutine.
class SimServer {
public:
    SimServer(boost::asio::io_context& io, SimContext& context);

    // Binds and listens on options.listen_host:listen_port (port 0: ephemeral).
    // Throws boost::system::system_error on failure.
    boost::asio::ip::tcp::endpoint listen();
    void start();

private:
    boost::asio::awaitable<void> acceptLoop();

    boost::asio::io_context& io_;
    SimContext& context_;
    boost::asio::ip::tcp::acceptor acceptor_;
};

}  // namespace dpgate::sim
