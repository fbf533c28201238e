// The client's side of one request, as the request path sees it: the
// connection's byte stream, the body still to read, and the writer of small
// answers. The session (process/client_session.hpp) owns the connection,
// reads each request's head and runs the keep-alive loop; this is all a
// request may do with it.
#pragma once
//
// GCC 12 destroys class-type temporaries inside a co_await expression twice
// (a compiler bug, seen here as ASan's "free on address which was not
// malloc()-ed"). Every coroutine in gateway/ names such values first:
// `ApiError error = ApiError::badRequest(...); co_await refuse(c, error, ...)`,
// never `co_await refuse(c, ApiError::badRequest(...), ...)`.

#include "common/api_error.hpp"
#include "conf/config.hpp"
#include "gateway/http/client_request.hpp"
#include "gateway/net/client_stream.hpp"
#include "gateway/net/net.hpp"

#include <memory>
#include <optional>
#include <string>

namespace dpgate::gateway {

class ClientConnection : public std::enable_shared_from_this<ClientConnection> {
public:
    // `tls` is the listener's TLS context, null for plain HTTP; `peer` the
    // client's address, as accept() gave it.
    ClientConnection(DeadlineList& deadlines, tcp::socket socket, const tcp::endpoint& peer,
                     std::shared_ptr<net::ssl::context> tls);
    ClientConnection(const ClientConnection&) = delete;
    ClientConnection& operator=(const ClientConnection&) = delete;

    ClientStream& stream() { return stream_; }
    const std::string& peerAddress() const { return peer_address_; }
    // Ends the connection now: a request in progress fails its next read or write.
    void close();

    // The body, once the head has earned it. takeBody(): from what came with
    // the head; true when that is all of it. readBody(): the rest as it
    // arrives (after "100 Continue" when the client waits for it).
    bool takeBody();
    struct BodyRead {
        bool complete = false;
        // Why the body did not come whole: a refusal to answer (400 framing,
        // 413, 503 beyond limits.max_buffered_body_bytes: `retry_after` set),
        // or the client went quiet or away mid-body (`gone`, for the access
        // record; null when it left before the body began).
        std::optional<ApiError> refusal;
        std::string_view retry_after;
        const char* gone = nullptr;
    };
    awaitable<BodyRead> readBody(const conf::LimitsConfig& limits);

    // Writes a complete small answer to the request in progress. An answer
    // to HEAD goes without its body. An answer given before the body was
    // read drops what of the body is here already; when more is to come,
    // the answer says "Connection: close" (response.keep_alive() turns
    // false) and the connection lingers after it.
    struct Written {
        bool ok = false;          // the write went through
        uint64_t body_bytes = 0;  // of the body, as sent (0 for HEAD)
    };
    awaitable<Written> writeResponse(http::response<http::string_body>& response, const conf::LimitsConfig& limits);

protected:
    // What the read buffer holds, as text.
    std::string_view bufferedBytes() const;
    // A head or body the parser refused, as the client is told.
    static ApiError refusalOf(const RequestRefusal& refusal);
    // The body of a request answered from its head: what of it is here is
    // read through and dropped.
    void dropBufferedBody();
    // Writes `response` whole, or only its head (an answer to HEAD).
    awaitable<bool> send(http::response<http::string_body>& response, bool head_only, uint64_t write_timeout_ms);

    ClientStream stream_;
    std::shared_ptr<net::ssl::context> tls_;  // kept while the connection lives
    beast::flat_buffer buffer_;
    std::string peer_address_;
    // The request being read and answered: its head, then its body. Reset
    // after each request, which frees the body and its share of the budget.
    std::optional<ClientRequestParser> parser_;
    bool expects_continue_ = false;  // the request in progress sent "Expect: 100-continue"
};

}  // namespace dpgate::gateway
