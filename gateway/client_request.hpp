// A client's request as the gateway keeps it, and the parser that reads it:
// Beast's HTTP/1.1 grammar, framing and chunk decoding, with the fields in a
// HeadFields (HeadFieldsParser, head_fields.hpp) instead of a
// beast::http::fields, and the body in one std::string that grows as it
// arrives.
//
// The body: Beast's string_body reserves the declared Content-Length as soon
// as the header is parsed, so 300 connections that each announce a 200 MB
// body and send one byte would hold 60 GB of address space. This one grows
// with what arrives instead: up to 1 MiB at once, then the declared length
// once half a MiB of it is in (so a real upload still lands in one buffer,
// copied at most once). It always keeps kPaddingBytes of capacity past the
// end, which admission's scan (simdjson) reads without a copy.
#pragma once

#include "admission/request_scan.hpp"
#include "gateway/head_fields.hpp"
#include "gateway/net.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace dpgate::gateway {

class ClientRequest {
public:
    http::verb method() const { return method_; }
    std::string_view method_string() const { return method_string_; }
    std::string_view target() const { return target_; }
    unsigned version() const { return version_; }
    // As the parser read it: HTTP/1.1 unless "Connection: close", HTTP/1.0
    // only with "Connection: keep-alive".
    bool keep_alive() const { return keep_alive_; }

    const HeadFields& fields() const { return fields_; }
    std::string_view operator[](http::field name) const { return fields_[name]; }
    std::string_view operator[](std::string_view name) const { return fields_[name]; }

    std::string& body() { return body_; }
    const std::string& body() const { return body_; }

private:
    friend class ClientRequestParser;

    http::verb method_ = http::verb::unknown;
    std::string method_string_;
    std::string target_;
    unsigned version_ = 11;
    bool keep_alive_ = true;
    HeadFields fields_;
    std::string body_;
};

class ClientRequestParser : public HeadFieldsParser<true> {
public:
    static constexpr std::size_t kFirstReserveBytes = 1 << 20;
    static constexpr std::size_t kPaddingBytes = admission::kScanPaddingBytes;

    ClientRequestParser() = default;

    // The request so far: its start line and body (the fields are fields()).
    const ClientRequest& get() const { return request_; }
    // The request, once is_done(); the parser is spent.
    ClientRequest release();

private:
    void on_request_impl(http::verb method, beast::string_view method_string, beast::string_view target, int version,
                         error_code& ec) override;
    void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code& ec) override;
    std::size_t onBody(beast::string_view bytes, error_code& ec) override;

    ClientRequest request_;
    std::uint64_t declared_ = 0;  // Content-Length, 0 when chunked or absent
};

}  // namespace dpgate::gateway
