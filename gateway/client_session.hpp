// One client connection: read a request (framing checks, header deadline,
// body limit), answer it locally or relay it upstream, repeat while
// keep-alive. Runs as a coroutine on its worker's single thread.
#pragma once
//
// GCC 12 destroys class-type temporaries inside a co_await expression twice
// (a compiler bug, seen here as ASan's "free on address which was not
// malloc()-ed"). Every coroutine in gateway/ names such values first:
// `ApiError error = ApiError::badRequest(...); co_await writeError(error, ...)`,
// never `co_await writeError(ApiError::badRequest(...), ...)`.

#include "gateway/access_log.hpp"
#include "gateway/api_error.hpp"
#include "gateway/client_stream.hpp"
#include "gateway/net.hpp"
#include "gateway/request_context.hpp"

#include <memory>
#include <optional>
#include <string>

namespace dpgate::gateway {

class Worker;

class ClientSession : public std::enable_shared_from_this<ClientSession> {
public:
    // `tls` is the listener's TLS context, null for plain HTTP.
    // `peer`: the client's address, as accept() gave it.
    ClientSession(Worker& worker, tcp::socket socket, const tcp::endpoint& peer,
                  std::shared_ptr<net::ssl::context> tls);
    ~ClientSession();

    static void start(std::shared_ptr<ClientSession> session);

    // Called by the worker on shutdown: closes the connection if it is
    // waiting for a request; a request in progress finishes first.
    void closeIfIdle();
    void close();

    Worker& worker() { return worker_; }
    ClientStream& stream() { return stream_; }
    beast::flat_buffer& buffer() { return buffer_; }
    const std::string& peerAddress() const { return peer_address_; }

    // Writes a complete small answer to the request in progress; returns
    // false when the write failed. The key lease is released first (a client
    // that sends its next request the moment it has the answer must find its
    // slot free); the access record learns the status and body bytes.
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
    awaitable<ReadResult> readRequest(std::optional<ClientRequestParser>& parser);
    // Refuses a request the gateway did not fully read: the connection closes after.
    awaitable<ReadResult> refuseRequest(const ApiError& error);
    // One request, start to end: the request path (request_path.hpp) inside
    // the session's guarantees — any exception becomes a 500 (or a closed
    // connection when the answer had begun), a log line, a metric and an
    // access record.
    awaitable<bool> serve(ClientRequest& request);
    awaitable<bool> answerInternalError(AccessRecord& record, const conf::Config& config, const std::string& what);

    Worker& worker_;
    ClientStream stream_;
    std::shared_ptr<net::ssl::context> tls_;  // kept while the connection lives
    beast::flat_buffer buffer_;
    std::string peer_address_;
    RequestContext* request_ = nullptr;  // the request being answered
    // The access record of the request being answered, reset for each
    // (AccessRecord::reset: its strings' buffers serve every request).
    AccessRecord record_;
    bool idle_ = true;
};

}  // namespace dpgate::gateway
