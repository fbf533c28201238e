// One upstream request and its answer: the request's bytes to a leased
// (backend, rank) on a pooled or fresh connection, the answer's head read
// and parsed, its body read piece by piece for the pump (body_pump.hpp),
// and the connection given back when the answer ended cleanly. It is the
// UpstreamConnector the retry loop tries through (retry.hpp); deciding where
// the request goes and what the client sees are not its business.
#pragma once

#include "admission/verdict.hpp"
#include "conf/config.hpp"
#include "gateway/backends/upstream_pool.hpp"
#include "gateway/http/client_request.hpp"
#include "gateway/http/upstream_response_parser.hpp"
#include "gateway/path/upstream_connector.hpp"

#include <array>
#include <memory>
#include <string>
#include <string_view>

namespace dpgate::metrics {
class GatewayMetrics;
}

namespace dpgate::gateway {

class BackendRegistry;
class ClientWatch;
class PathLocal;

class UpstreamExchange final : public UpstreamConnector {
public:
    // What goes upstream: the client's request, admitted as `admitted`
    // (its splice of max_tokens), under `request_id`, from `peer`.
    // `stream_usage_added`: dpgate asks upstream for the usage chunk
    // (stream_options.include_usage). `watch` learns each try's connection.
    struct Request {
        const ClientRequest& request;
        const admission::Admitted& admitted;
        std::string_view request_id;
        std::string_view peer;
        bool stream_usage_added;
    };
    UpstreamExchange(const Request& request, const conf::LimitsConfig& limits, BackendRegistry& backends,
                     PathLocal& local, metrics::GatewayMetrics* metrics, ClientWatch& watch);
    ~UpstreamExchange() override;

    awaitable<UpstreamAnswer> send(const SlotLease& slot) override;

    // The last try's connection and its answer (head parsed), after send()
    // answered.
    UpstreamConnection& connection() { return *connection_; }
    UpstreamResponseParser& answer() { return *connection_->answer; }

    // The next piece of the answer's body into the parser's body window:
    // what the connection's buffer holds first, a read only when that gave
    // no body byte. need_buffer (the piece filled the window) is not an error.
    awaitable<error_code> readBodyPiece();

    // The answer from `backend` ended (`whole`: all of it was read): the
    // connection goes back to the pool when it can serve another request.
    // Nothing is held past the answer.
    void release(size_t backend, bool whole);

private:
    // Serializes the upstream request head into head_ and points buffers_ at
    // it and the body (with the splice admission and dpgate insert after the
    // body's '{'): the body is never copied.
    void buildRequest(size_t backend, uint32_t rank);
    // Counts `n` connections to `backend` closed for `reason` (dpgate_upstream_connections_dropped_total).
    void countDropped(size_t backend, const char* reason, uint32_t n) const;

    Request request_;
    const conf::LimitsConfig& limits_;
    BackendRegistry& backends_;
    PathLocal& local_;
    metrics::GatewayMetrics* metrics_;
    ClientWatch& watch_;
    std::unique_ptr<UpstreamConnection> connection_;  // the last try's, with its answer, while it has one
    std::string head_;
    std::string splice_;  // spliced after the body's '{': max_tokens and/or stream_options
    std::array<net::const_buffer, 4> buffers_;
};

}  // namespace dpgate::gateway
