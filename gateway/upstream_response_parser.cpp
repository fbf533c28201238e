#include "gateway/upstream_response_parser.hpp"

#include <algorithm>
#include <cstring>

namespace dpgate::gateway {

std::size_t UpstreamResponseParser::onBody(beast::string_view body, error_code& ec) {
    if (window_.data == nullptr) {
        ec = http::error::need_buffer;
        return 0;
    }
    const size_t n = std::min(body.size(), window_.size);
    if (n != 0) std::memcpy(window_.data, body.data(), n);
    window_.data += n;
    window_.size -= n;
    if (n != body.size()) ec = http::error::need_buffer;
    return n;
}

}  // namespace dpgate::gateway
