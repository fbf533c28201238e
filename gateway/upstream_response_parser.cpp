#include "gateway/upstream_response_parser.hpp"

#include <boost/beast/core/string.hpp>

#include <algorithm>
#include <cstring>

namespace dpgate::gateway {

void UpstreamResponseParser::on_field_impl(http::field name, beast::string_view name_string, beast::string_view value,
                                           error_code&) {
    // The header is bounded by header_limit (Beast's 8 KiB by default), so
    // offsets fit in 32 bits.
    if (bytes_.capacity() == 0) bytes_.reserve(512);
    const auto name_at = uint32_t(bytes_.size());
    bytes_.append(name_string.data(), name_string.size());
    const auto value_at = uint32_t(bytes_.size());
    bytes_.append(value.data(), value.size());
    fields_.push_back({name, name_at, uint32_t(name_string.size()), value_at, uint32_t(value.size())});
}

std::string_view UpstreamResponseParser::operator[](http::field name) const {
    for (const Field& f : fields_)
        if (f.name == name) return valueOf(f);
    return {};
}

std::string_view UpstreamResponseParser::operator[](std::string_view name) const {
    for (const Field& f : fields_)
        if (beast::iequals(beast::string_view(nameOf(f)), beast::string_view(name))) return valueOf(f);
    return {};
}

bool UpstreamResponseParser::has(http::field name) const {
    return std::any_of(fields_.begin(), fields_.end(), [&](const Field& f) { return f.name == name; });
}

std::size_t UpstreamResponseParser::write(beast::string_view body, error_code& ec) {
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
