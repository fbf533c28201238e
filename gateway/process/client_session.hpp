// One client connection: read a request's head (framing checks, header
// deadline), hand it to the request path, which reads the body only once the
// head has earned it, answer locally or relay upstream, repeat while
// keep-alive. A request answered before its body was read ends the
// connection with a lingering close. Runs as a coroutine on its worker's
// single thread; the request path sees only its ClientConnection half.
#pragma once

#include "gateway/net/connections_per_address.hpp"
#include "gateway/net/idle_list.hpp"
#include "gateway/net/net.hpp"
#include "gateway/path/access_log.hpp"
#include "gateway/path/client_connection.hpp"

#include <memory>
#include <string>

namespace dpgate::gateway {

class Worker;

class ClientSession final : public ClientConnection, public IdleConnection {
public:
    // `address_slot` counts the connection against
    // limits.max_connections_per_ip while it lives.
    ClientSession(Worker& worker, tcp::socket socket, const tcp::endpoint& peer, std::shared_ptr<net::ssl::context> tls,
                  ConnectionsPerAddress::Slot address_slot);
    ~ClientSession();

    static void start(std::shared_ptr<ClientSession> session);

    // Called by the worker on shutdown: closes the connection if it is
    // waiting for a request; a request in progress finishes first.
    void closeIfIdle();
    // At max_connections, the oldest idle connection of all goes.
    void closeIdle() override { close(); }
    // Linked into the worker's IdleList while the connection waits for a
    // request or lingers.
    IdleHook& idleHook() { return idle_; }

private:
    enum class ReadResult { request, closed };

    awaitable<void> run();
    // TLS listener: a ClientHello gets the handshake; plain HTTP gets a 400
    // saying so and the connection closes. False when the session must end.
    awaitable<bool> startTls();
    // The next request's head into parser_. Its first byte is waited for
    // limits.header_timeout_ms on a new connection (one that never sends a
    // byte is cut like a slow header), limits.keepalive_timeout_ms between
    // requests; from that byte on the header deadline covers the whole head.
    awaitable<ReadResult> readHead();
    // Refuses a request whose head failed the framing checks: the
    // connection closes after, lingering.
    awaitable<ReadResult> refuseRequest(const ApiError& error);
    // After an answer that left the body unread: lingering_close.hpp, for
    // limits.linger_timeout_ms at most, the connection idle meanwhile.
    awaitable<void> lingeringClose();
    // The request's parser and body freed; after a large body, the heap's
    // free memory goes back to the system.
    void endRequest();
    // One request, start to end: the request path (request_path.hpp) inside
    // the session's guarantees — any exception becomes a 500 (or a closed
    // connection when the answer had begun), a log line, a metric and an
    // access record.
    awaitable<bool> serve(ClientRequest& request);
    awaitable<bool> answerInternalError(AccessRecord& record, const conf::Config& config, const std::string& what);

    Worker& worker_;
    ConnectionsPerAddress::Slot address_slot_;
    // The access record of the request being answered, reset for each
    // (AccessRecord::reset: its strings' buffers serve every request).
    AccessRecord record_;
    IdleHook idle_{this};
    uint64_t heads_read_ = 0;
};

}  // namespace dpgate::gateway
