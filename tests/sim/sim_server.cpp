#include "sim_server.hpp"

#include <chrono>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http_session.hpp"
#include "prompt_hasher.hpp"

namespace dpgate::sim {

namespace net = boost::asio;
using tcp = net::ip::tcp;

SimServer::SimServer(net::io_context& io, SimContext& context) : io_(io), context_(context), acceptor_(io) {}

tcp::endpoint SimServer::listen() {
    tcp::endpoint endpoint(net::ip::make_address(context_.options.listen_host), context_.options.listen_port);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(net::socket_base::max_listen_connections);
    return acceptor_.local_endpoint();
}

void SimServer::start() { net::co_spawn(io_, acceptLoop(), net::detached); }

net::awaitable<void> SimServer::acceptLoop() {
    constexpr auto kNoThrow = net::as_tuple(net::use_awaitable);
    for (;;) {
        auto [ec, socket] = co_await acceptor_.async_accept(net::make_strand(io_), kNoThrow);
        if (ec == net::error::operation_aborted || !acceptor_.is_open()) co_return;
        if (ec) {
            // Out of descriptors or a connection reset before accept: back off a
            // little instead of spinning.
            net::steady_timer pause(io_, std::chrono::milliseconds(10));
            co_await pause.async_wait(kNoThrow);
            continue;
        }
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        startHttpSession(context_, std::move(socket));
    }
}

}  // namespace dpgate::sim
