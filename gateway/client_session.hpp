// One client connection: read a request (framing checks, header deadline,
// body limit), answer it locally or relay it upstream, repeat while
// keep-alive. Runs as a coroutine on its worker's single thread.
#pragma once
//
// GCC 12 destroys class-type temporaries inside a co_await expression twice
// (a compiler bug, seen here as ASan's "free on address which was not
// malloc()-ed"). Every coroutine in gateway/ names such values first:
// `ApiError error{...}; co_await writeError(error, ...)`, never
// `co_await writeError({...}, ...)`.

#include "gateway/access_log.hpp"
#include "gateway/api_error.hpp"
#include "gateway/client_stream.hpp"
#include "gateway/net.hpp"
#include "gateway/request_body.hpp"
#include "gateway/auth/key_limiter.hpp"

#include <memory>
#include <optional>
#include <string>

namespace dpgate::gateway {

class Worker;

using ClientRequest = http::request<RequestBody>;

class ClientSession : public std::enable_shared_from_this<ClientSession> {
public:
    // `tls` is the listener's TLS context, null for plain HTTP.
    ClientSession(Worker& worker, tcp::socket socket, std::shared_ptr<net::ssl::context> tls);
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

    // Writes a complete small response; returns false when the write failed.
    // The request's access record learns the status and body bytes (and,
    // for writeError, the error code).
    awaitable<bool> writeResponse(http::response<http::string_body>& response);
    awaitable<bool> writeError(const ApiError& error, const std::string& request_id, bool keep_alive);
    // Frees the request's per-key concurrency slot. Called just before the
    // last bytes of an answer are written: a client that sends its next
    // request the moment it has the answer must find the slot free.
    void releaseKeySlot();
    static http::response<http::string_body> errorResponse(const ApiError& error, const std::string& request_id,
                                                           bool keep_alive);

private:
    enum class ReadResult { request, closed };

    awaitable<void> run();
    // TLS listener: a ClientHello gets the handshake; plain HTTP gets a 400
    // saying so and the connection closes. False when the session must end.
    awaitable<bool> startTls();
    awaitable<ReadResult> readRequest(std::optional<http::request_parser<RequestBody>>& parser);
    // Refuses a request the gateway did not fully read: the connection closes after.
    awaitable<ReadResult> refuseRequest(const ApiError& error);
    awaitable<bool> handle(ClientRequest& request, AccessRecord& record);

    Worker& worker_;
    ClientStream stream_;
    std::shared_ptr<net::ssl::context> tls_;  // kept while the connection lives
    beast::flat_buffer buffer_;
    std::string peer_address_;
    AccessRecord* record_ = nullptr;  // the request being answered
    std::shared_ptr<auth::KeyLimiter> key_limiter_;  // set while a request holds a key slot
    std::string key_slot_name_;
    bool idle_ = true;
};

}  // namespace dpgate::gateway
