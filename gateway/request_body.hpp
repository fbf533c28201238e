// The client's request body as one std::string, for Beast's parser.
//
// Beast's string_body reserves the declared Content-Length as soon as the
// header is parsed: 300 connections that each announce a 200 MB body and
// send one byte then hold 60 GB of address space. This body grows with what
// arrives instead: up to 1 MiB at once, then the declared length once half a
// MiB of it is in (so a real upload still lands in one buffer, copied at
// most once). It always keeps kScanPaddingBytes of capacity past the end,
// which admission's scan (simdjson) reads without a copy.
#pragma once

#include "admission/request_scan.hpp"
#include "gateway/net.hpp"

#include <boost/optional.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace dpgate::gateway {

struct RequestBody {
    using value_type = std::string;

    static std::uint64_t size(const value_type& body) { return body.size(); }

    class reader {
    public:
        static constexpr std::size_t kFirstReserveBytes = 1 << 20;
        static constexpr std::size_t kPaddingBytes = admission::kScanPaddingBytes;

        template <bool isRequest, class Fields>
        reader(http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

        void init(const boost::optional<std::uint64_t>& length, error_code& ec) {
            ec = {};
            declared_ = length.value_or(0);
            if (declared_ > 0)
                body_.reserve(std::size_t(std::min<std::uint64_t>(declared_, kFirstReserveBytes)) + kPaddingBytes);
        }

        template <class ConstBufferSequence>
        std::size_t put(const ConstBufferSequence& buffers, error_code& ec) {
            const std::size_t extra = net::buffer_size(buffers);
            const std::size_t size = body_.size();
            if (extra > body_.max_size() - size - kPaddingBytes) {
                ec = http::error::buffer_overflow;
                return 0;
            }
            const std::size_t needed = size + extra + kPaddingBytes;
            if (declared_ > kFirstReserveBytes && size + extra >= kFirstReserveBytes / 2 &&
                body_.capacity() < declared_ + kPaddingBytes)
                body_.reserve(std::max<std::size_t>(std::size_t(declared_) + kPaddingBytes, needed));
            else if (body_.capacity() < needed) body_.reserve(std::max(needed, 2 * body_.capacity()));
            body_.resize(size + extra);
            net::buffer_copy(net::buffer(body_.data() + size, extra), buffers);
            ec = {};
            return extra;
        }

        void finish(error_code& ec) { ec = {}; }

    private:
        value_type& body_;
        std::uint64_t declared_ = 0;
    };
};

}  // namespace dpgate::gateway
