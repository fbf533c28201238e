// One client connection: read a request's head (framing checks, header
// deadline), hand it to the request path, which reads the body only once the
// head has earned it (readBody), answer locally or relay upstream, repeat
// while keep-alive. A request answered before its body was read ends the
// connection with a lingering close. Runs as a coroutine on its worker's
// single thread.
#pragma once
//
// GCC 12 destroys class-type temporaries inside a co_await expression twice
// (a compiler bug, seen here as ASan's "free on address which was not
// malloc()-ed"). Every coroutine in gateway/ names such values first:
// `ApiError error = ApiError::badRequest(...); co_await writeError(error, ...)`,
// never `co_await writeError(ApiError::badRequest(...), ...)`.

#include "common/api_error.hpp"
#include "gateway/http/client_request.hpp"
#include "gateway/net/client_stream.hpp"
#include "gateway/net/connections_per_address.hpp"
#include "gateway/net/idle_list.hpp"
#include "gateway/net/net.hpp"
#include "gateway/path/access_log.hpp"
#include "gateway/path/request_context.hpp"

#include <memory>
#include <optional>
#include <string>

namespace dpgate::gateway {

class Worker;

class ClientSession : public std::enable_shared_from_this<ClientSession> {
public:
    // `tls` is the listener's TLS context, null for plain HTTP.
    // `peer`: the client's address, as accept() gave it; `address_slot`
    // counts the connection against limits.max_connections_per_ip while it lives.
    ClientSession(Worker& worker, tcp::socket socket, const tcp::endpoint& peer, std::shared_ptr<net::ssl::context> tls,
                  ConnectionsPerAddress::Slot address_slot);
    ~ClientSession();

    static void start(std::shared_ptr<ClientSession> session);

    // Called by the worker on shutdown: closes the connection if it is
    // waiting for a request; a request in progress finishes first.
    void closeIfIdle();
    void close();

    Worker& worker() { return worker_; }
    ClientStream& stream() { return stream_; }
    const std::string& peerAddress() const { return peer_address_; }
    // Linked into the worker's IdleList while the connection waits for a
    // request or lingers.
    IdleHook& idleHook() { return idle_; }

    // The request path's body stage (request_path.cpp), once the head has
    // earned it. takeBody(): the body from what came with the head; true
    // when that is all of it. readBody(): the rest as it arrives (after
    // "100 Continue" when the client waits for it). False when the request
    // ends without its body: refused and answered here (400 framing, 413,
    // 503 beyond limits.max_buffered_body_bytes), or the client went quiet or away.
    bool takeBody();
    awaitable<bool> readBody();

    // Writes a complete small answer to the request in progress; returns
    // false when the write failed. The key lease is released first (a client
    // that sends its next request the moment it has the answer must find its
    // slot free); the access record learns the status and body bytes. An
    // answer to HEAD goes without its body. An answer given before the body
    // was read drops what of the body is here already; when more is to
    // come, the answer says "Connection: close" (response.keep_alive() turns
    // false) and the connection lingers after it.
    awaitable<bool> writeResponse(http::response<http::string_body>& response);
    // The same for an error (the record learns its code), with one extra
    // header when `extra` is given. Returns written && keep_alive.
    awaitable<bool> writeError(const ApiError& error, bool keep_alive, http::field extra = http::field::unknown,
                               std::string_view extra_value = {});

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
    // The body of a request answered from its head: what of it is here is
    // read through and dropped.
    void dropBufferedBody();
    // Writes `response` whole, or only its head (an answer to HEAD).
    awaitable<bool> send(http::response<http::string_body>& response, bool head_only);
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
    ClientStream stream_;
    std::shared_ptr<net::ssl::context> tls_;  // kept while the connection lives
    ConnectionsPerAddress::Slot address_slot_;
    beast::flat_buffer buffer_;
    std::string peer_address_;
    // The request being read and answered: its head, then its body. Reset
    // after each request, which frees the body and its share of the budget.
    std::optional<ClientRequestParser> parser_;
    RequestContext* request_ = nullptr;  // the request being answered
    // The access record of the request being answered, reset for each
    // (AccessRecord::reset: its strings' buffers serve every request).
    AccessRecord record_;
    IdleHook idle_{this};
    uint64_t heads_read_ = 0;
    bool expects_continue_ = false;  // the request in progress sent "Expect: 100-continue"
};

}  // namespace dpgate::gateway
