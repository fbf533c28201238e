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
#include "gateway/auth/key_store.hpp"
#include "gateway/access_log.hpp"
#include "gateway/client_session.hpp"
#include "gateway/upstream_pool.hpp"

#include <array>
#include <memory>
#include <optional>
#include <string>

namespace dpgate::gateway {

class Relay {
public:
    // `key` is the client's authenticated key (null when auth is optional and
    // none was sent); a trusted key may pin X-data-parallel-rank itself.
    // `record` (the access-log line) learns the route, status, usage and timings.
    Relay(ClientSession& session, ClientRequest& request, AccessRecord& record, bool keep_alive,
          const auth::KeyInfo* key);

    // Records the request's outcome in the metrics (unless metrics are off).
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
    // A backend's error answer (>= 400, not a stream): read whole (it is
    // small) and sent in OpenAI's error shape.
    awaitable<bool> relayErrorAnswer(std::unique_ptr<UpstreamConnection> connection,
                                     http::response_parser<http::buffer_body>& parser, size_t backend);
    // The next piece of an upstream body into the parser's body buffer: what
    // connection.buffer already holds first, a read only when that gave no
    // body byte. need_buffer (the piece filled the buffer) is not an error.
    awaitable<error_code> readBodyPiece(UpstreamConnection& connection,
                                        http::response_parser<http::buffer_body>& parser);
    static awaitable<void> watchClient(std::shared_ptr<ClientSession> session, std::shared_ptr<ClientWatch> watch);

    ClientSession& session_;
    ClientRequest& request_;
    AccessRecord& record_;  // record_.status: what the client was answered; 0 = nothing (it left)
    const std::string& request_id_;
    bool keep_alive_;
    const auth::KeyInfo* key_;
    const bool metrics_on_;
    // dpgate added stream_options.include_usage upstream: the usage chunk
    // is removed from what the client sees.
    bool stream_usage_added_ = false;
    // dpgate's exact prompt count, for the answer's usage to be checked
    // against (count_check.hpp); unset when admission cannot know it
    // (Admitted::expected_usage_prompt_tokens).
    std::optional<uint64_t> checked_prompt_tokens_;
    std::shared_ptr<ClientWatch> watch_;
    // The prefill work this request puts on its slot (its prompt tokens not
    // expected in cache there), from the moment it is sent until its prefill
    // is over: the first body byte of a stream, the answer of a non-stream.
    struct SlotLoad {
        std::atomic<int64_t>* counter = nullptr;
        int64_t amount = 0;
        void hold(std::atomic<int64_t>& c, int64_t a) {
            release();
            counter = &c;
            amount = a;
            c.fetch_add(a, std::memory_order_relaxed);
        }
        void release() {
            if (counter) counter->fetch_sub(amount, std::memory_order_relaxed);
            counter = nullptr;
        }
        ~SlotLoad() { release(); }
    } slot_load_;
    // The work meter was charged `work_charged_` tokens on `work_slot_` (a
    // load index) when the request was sent; the answer's usage corrects it.
    size_t work_slot_ = SIZE_MAX;
    double work_charged_ = 0;
    const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    std::string upstream_head_;
    std::string splice_;  // spliced after the body's '{': max_tokens and/or stream_options
    std::array<net::const_buffer, 4> upstream_buffers_;
};

}  // namespace dpgate::gateway
