#include "gateway/path/client_watch.hpp"

#include "gateway/backends/upstream_pool.hpp"
#include "gateway/path/client_connection.hpp"

#include <cerrno>

#include <sys/socket.h>

namespace dpgate::gateway {

ClientWatch::~ClientWatch() {
    if (!state_) return;
    state_->active = false;
    state_->upstream = nullptr;
    error_code ec;
    client_->stream().socket().cancel(ec);
}

void ClientWatch::start(net::io_context& io, ClientConnection& client) {
    client_ = &client;
    state_ = std::make_shared<State>();
    net::co_spawn(io, watch(client.shared_from_this(), state_), net::detached);
}

awaitable<void> ClientWatch::watch(std::shared_ptr<ClientConnection> client, std::shared_ptr<State> state) {
    // Owns what it touches: it may complete after the watch is gone.
    auto& socket = client->stream().socket();
    auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, use_nothrow);
    if (!state->active || ec) co_return;
    char byte;
    ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    bool gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    if (!gone) co_return;  // a pipelined request: it waits in the socket for its turn
    state->client_gone = true;
    if (state->upstream) state->upstream->stream.close();
}

}  // namespace dpgate::gateway
