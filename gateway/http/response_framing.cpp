#include "gateway/http/response_framing.hpp"

#include "gateway/http/forwarded_headers.hpp"
#include "gateway/http/head_writer.hpp"
#include "gateway/http/upstream_response_parser.hpp"

#include <charconv>

namespace dpgate::gateway {

using namespace std::string_view_literals;

void ResponseFraming::start(const UpstreamResponseParser& upstream, unsigned status, Body body, uint64_t content_length,
                            bool keep_alive, std::string_view request_id, std::string_view route,
                            std::string_view extra_fields) {
    body_ = body;
    head_sent_ = false;
    finished_ = body == Body::none;
    head_.clear();
    std::string_view reason = http::obsolete_reason(http::int_to_status(status));
    if (http::int_to_status(status) == http::status::unknown) reason = "Unknown";
    {
        HeadWriter w(head_, 32 + reason.size());
        w.put("HTTP/1.1 "sv).put(uint64_t(status)).put(" "sv).put(reason).put("\r\n"sv);
    }
    static const FieldNames kSetHere = {"content-length", "x-request-id", "x-dpgate-route"};
    appendEndToEndFields(upstream.fields(), head_, kSetHere);
    HeadWriter w(head_, 128 + request_id.size() + route.size() + extra_fields.size());
    w.put("X-Request-ID: "sv).put(request_id).put("\r\nX-Dpgate-Route: "sv).put(route).put("\r\n"sv);
    if (!extra_fields.empty()) w.put(extra_fields);
    if (body == Body::length) {
        w.put("Content-Length: "sv).put(content_length).put("\r\n"sv);
    } else if (body == Body::chunked) {
        w.put("Transfer-Encoding: chunked\r\n"sv);
    }
    if (!keep_alive) w.put("Connection: close\r\n"sv);
    w.put("\r\n"sv);
}

const ResponseFraming::Buffers& ResponseFraming::next(std::string_view piece, bool last) {
    static constexpr std::string_view kCrlf = "\r\n";
    static constexpr std::string_view kLastChunk = "0\r\n\r\n";
    buffers_ = {};
    bytes_ = 0;
    size_t n = 0;
    auto add = [&](const void* data, size_t size) {
        if (size == 0) return;
        buffers_[n++] = net::const_buffer(data, size);
        bytes_ += size;
    };
    if (!head_sent_) {
        add(head_.data(), head_.size());
        head_sent_ = true;
    }
    if (finished_) return buffers_;
    if (body_ == Body::chunked) {
        if (!piece.empty()) {
            char* p = chunk_size_;
            auto [end, ec] = std::to_chars(p, p + sizeof chunk_size_ - 2, piece.size(), 16);
            end[0] = '\r';
            end[1] = '\n';
            add(chunk_size_, size_t(end + 2 - p));
            add(piece.data(), piece.size());
            add(kCrlf.data(), kCrlf.size());
        }
        if (last) add(kLastChunk.data(), kLastChunk.size());
    } else {
        add(piece.data(), piece.size());
    }
    if (last) finished_ = true;
    return buffers_;
}

}  // namespace dpgate::gateway
