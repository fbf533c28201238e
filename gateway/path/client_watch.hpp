// Watches the client while its request is upstream: a client that hangs up
// (EOF or reset) closes the upstream connection at once, even during a
// prefill that has not produced a byte yet, which is how the backend learns
// to stop. Costs a coroutine and an epoll re-arm per request, so the
// request path starts it only where a hang-up would leave the backend
// working for long.
#pragma once

#include "gateway/net/net.hpp"

#include <memory>

namespace dpgate::gateway {

class ClientConnection;
struct UpstreamConnection;

class ClientWatch {
public:
    ClientWatch() = default;
    ClientWatch(const ClientWatch&) = delete;
    ClientWatch& operator=(const ClientWatch&) = delete;
    // Stops watching; the watching coroutine ends at its next wake-up.
    ~ClientWatch();

    void start(net::io_context& io, ClientConnection& client);
    // The upstream connection to close when the client goes (null: none now).
    void follow(UpstreamConnection* upstream) {
        if (state_) state_->upstream = upstream;
    }
    bool clientGone() const { return state_ && state_->client_gone; }

private:
    // Shared with the watching coroutine, which may outlive the watch.
    struct State {
        bool active = true;
        bool client_gone = false;
        UpstreamConnection* upstream = nullptr;
    };
    static awaitable<void> watch(std::shared_ptr<ClientConnection> client, std::shared_ptr<State> state);

    std::shared_ptr<State> state_;
    ClientConnection* client_ = nullptr;
};

}  // namespace dpgate::gateway
