#include "gateway/client_request.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace dpgate::gateway {

ClientRequest ClientRequestParser::release() {
    request_.keep_alive_ = keep_alive();
    request_.fields_ = std::move(fields_);
    return std::move(request_);
}

void ClientRequestParser::on_request_impl(http::verb method, beast::string_view method_string,
                                          beast::string_view target, int version, error_code&) {
    request_.method_ = method;
    request_.method_string_.assign(method_string.data(), method_string.size());
    request_.target_.assign(target.data(), target.size());
    request_.version_ = unsigned(version);
}

void ClientRequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code& ec) {
    ec = {};
    declared_ = length.value_or(0);
    if (declared_ > 0)
        request_.body_.reserve(std::size_t(std::min<std::uint64_t>(declared_, kFirstReserveBytes)) + kPaddingBytes);
}

std::size_t ClientRequestParser::onBody(beast::string_view bytes, error_code& ec) {
    std::string& body = request_.body_;
    const std::size_t extra = bytes.size();
    const std::size_t size = body.size();
    if (extra > body.max_size() - size - kPaddingBytes) {
        ec = http::error::buffer_overflow;
        return 0;
    }
    const std::size_t needed = size + extra + kPaddingBytes;
    if (declared_ > kFirstReserveBytes && size + extra >= kFirstReserveBytes / 2 &&
        body.capacity() < declared_ + kPaddingBytes)
        body.reserve(std::max<std::size_t>(std::size_t(declared_) + kPaddingBytes, needed));
    else if (body.capacity() < needed) body.reserve(std::max(needed, 2 * body.capacity()));
    body.append(bytes.data(), extra);
    ec = {};
    return extra;
}

}  // namespace dpgate::gateway
