// The client side of a relayed response, framed by hand: the head once, then
// the body pieces as they arrive, chunk-framed when the length is not known.
//
// Beast's serializer would do the same, but it walks its buffer sequence of
// fields and body several times per write; a relayed answer is one head and
// a few pieces, so they are laid out directly as at most five buffers.
#pragma once

#include "gateway/net/net.hpp"
#include "gateway/platform/string_pool.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dpgate::gateway {

class UpstreamResponseParser;

class ResponseFraming {
public:
    enum class Body { none, length, chunked };

    ResponseFraming() : head_(StringPool::take()) {}
    ResponseFraming(const ResponseFraming&) = delete;
    ResponseFraming& operator=(const ResponseFraming&) = delete;
    ~ResponseFraming() { StringPool::give(std::move(head_)); }

    // The head: status line, the upstream's end-to-end fields (without its
    // framing, X-Request-ID and X-Dpgate-Route), then dpgate's own, then
    // `extra_fields` (whole lines, "name: value\r\n" each).
    void start(const UpstreamResponseParser& upstream, unsigned status, Body body, uint64_t content_length,
               bool keep_alive, std::string_view request_id, std::string_view route,
               std::string_view extra_fields = {});

    // Buffers that carry the head (until it went out), `piece` framed, and
    // when `last` the end of a chunked body. Empty when there is nothing to
    // write. Valid until the next call; `piece` must outlive the write.
    using Buffers = std::array<net::const_buffer, 5>;
    const Buffers& next(std::string_view piece, bool last);

    bool headSent() const { return head_sent_; }
    bool finished() const { return finished_; }  // the body's end was framed
    Body body() const { return body_; }
    bool empty() const { return bytes_ == 0; }  // the last next() framed nothing

private:
    std::string head_;
    Body body_ = Body::none;
    bool head_sent_ = false;
    bool finished_ = false;
    size_t bytes_ = 0;
    char chunk_size_[20] = {};
    Buffers buffers_{};
};

}  // namespace dpgate::gateway
