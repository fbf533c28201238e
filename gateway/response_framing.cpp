#include "gateway/response_framing.hpp"

#include "gateway/forwarded_headers.hpp"
#include "gateway/upstream_response_parser.hpp"

#include <charconv>

namespace dpgate::gateway {

void ResponseFraming::start(const UpstreamResponseParser& upstream, unsigned status, Body body, uint64_t content_length,
                            bool keep_alive, std::string_view request_id, std::string_view route) {
    body_ = body;
    head_sent_ = false;
    finished_ = body == Body::none;
    head_.clear();
    head_.reserve(512);
    std::string_view reason = http::obsolete_reason(http::int_to_status(status));
    if (http::int_to_status(status) == http::status::unknown) reason = "Unknown";
    char code[8];
    auto [code_end, ec] = std::to_chars(code, code + sizeof code, status);
    head_.append("HTTP/1.1 ").append(code, code_end).append(" ").append(reason).append("\r\n");
    static const FieldNames kSetHere = {"content-length", "x-request-id", "x-dpgate-route"};
    appendEndToEndFields(upstream.fields(), head_, kSetHere);
    head_.append("X-Request-ID: ").append(request_id).append("\r\n");
    head_.append("X-Dpgate-Route: ").append(route).append("\r\n");
    if (body == Body::length) {
        char length[24];
        auto [end, lec] = std::to_chars(length, length + sizeof length, content_length);
        head_.append("Content-Length: ").append(length, end).append("\r\n");
    } else if (body == Body::chunked) {
        head_.append("Transfer-Encoding: chunked\r\n");
    }
    if (!keep_alive) head_.append("Connection: close\r\n");
    head_.append("\r\n");
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
