// The parser of a backend's answer: Beast's HTTP/1.1 grammar, framing and
// chunk decoding, with the fields in a HeadFields (HeadFieldsParser,
// head_fields.hpp; issue 18: the answer's head was ~4k instructions of a
// ~50k-instruction request as a beast::http::fields), and the body written
// into a window the relay hands over piece by piece, as http::buffer_body
// does. One per answer, like any Beast parser.
#pragma once

#include "gateway/head_fields.hpp"
#include "gateway/net.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace dpgate::gateway {

class UpstreamResponseParser : public HeadFieldsParser<false> {
public:
    // Where body bytes go: `data` advances and `size` shrinks as they are
    // written; parsing stops with http::error::need_buffer when size is 0
    // (or data is null), and the relay hands over the next window.
    struct Window {
        char* data = nullptr;
        size_t size = 0;
    };

    UpstreamResponseParser() = default;

    unsigned status() const { return status_; }
    Window& body() { return window_; }

    // The first field of that name, or empty (HeadFields).
    std::string_view operator[](http::field name) const { return fields_[name]; }
    std::string_view operator[](std::string_view name) const { return fields_[name]; }
    bool has(http::field name) const { return fields_.has(name); }

private:
    void on_response_impl(int code, beast::string_view, int, error_code&) override { status_ = unsigned(code); }
    std::size_t onBody(beast::string_view body, error_code& ec) override;

    unsigned status_ = 0;
    Window window_;
};

}  // namespace dpgate::gateway
