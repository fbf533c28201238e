// One proxied request: pick the backend, send the request upstream, relay the
// response to the client as it arrives.
//
// Streaming responses go chunk by chunk: a piece read from upstream is
// written to the client before the next piece is read, through one bounded
// buffer, so a slow client slows the upstream read (backpressure) instead of
// growing memory. A client that goes away closes the upstream connection,
// which is how the backend learns to stop generating.
#pragma once

#include "admission/verdict.hpp"
#include "conf/key_store.hpp"
#include "gateway/client_session.hpp"
#include "gateway/upstream_pool.hpp"

#include <array>
#include <memory>
#include <string>

namespace dpgate::gateway {

class Relay {
public:
    // `key` is the client's authenticated key (null when auth is optional and
    // none was sent); a trusted key may pin X-data-parallel-rank itself.
    Relay(ClientSession& session, ClientRequest& request, std::string request_id, bool keep_alive,
          const conf::KeyInfo* key);

    // Records the request's outcome in the metrics.
    ~Relay();

    // Returns whether the client connection may serve another request.
    awaitable<bool> run();

private:
    struct ClientWatch;
    enum class Attempt { ok, retry_fresh, failed };

    // Serializes the upstream request head into upstream_head_ and points
    // upstream_buffers_ at it and the body (with the max_tokens splice, if
    // admission inserted one): the body is never copied.
    void buildUpstreamRequest(size_t backend, uint32_t rank, const admission::Admitted& admitted);
    awaitable<Attempt> exchange(UpstreamConnection& connection, http::response_parser<http::buffer_body>& parser,
                                error_code& error);
    awaitable<bool> relayResponse(std::unique_ptr<UpstreamConnection> connection,
                                  http::response_parser<http::buffer_body>& parser, size_t backend, uint32_t rank);
    static awaitable<void> watchClient(std::shared_ptr<ClientSession> session, std::shared_ptr<ClientWatch> watch);

    ClientSession& session_;
    ClientRequest& request_;
    std::string request_id_;
    bool keep_alive_;
    const conf::KeyInfo* key_;
    std::shared_ptr<ClientWatch> watch_;
    const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    unsigned status_ = 0;  // what the client was answered; 0 = nothing (it left)
    std::string upstream_head_;
    std::array<net::const_buffer, 4> upstream_buffers_;
};

}  // namespace dpgate::gateway
