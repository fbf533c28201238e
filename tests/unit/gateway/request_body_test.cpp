#include "gateway/request_body.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dpgate::gateway {
namespace {

void parse(http::request_parser<RequestBody>& parser, const std::string& bytes, error_code& ec) {
    parser.body_limit(1ull << 40);
    parser.eager(true);
    parser.put(net::buffer(bytes), ec);
}

TEST(RequestBody, AnnouncedBodyReservesOneMebibyteNotItsLength) {
    error_code ec;
    http::request_parser<RequestBody> parser;
    parse(parser, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200000000\r\n\r\n{", ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(parser.get().body(), "{");
    EXPECT_LT(parser.get().body().capacity(), 2u << 20);
}

TEST(RequestBody, ARealUploadGetsItsWholeLengthOnceHalfAMebibyteIsIn) {
    const size_t length = 3u << 20;
    http::request_parser<RequestBody> parser;
    parser.body_limit(1ull << 40);
    error_code ec;
    std::string head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n";
    parser.put(net::buffer(head), ec);
    ASSERT_FALSE(ec);
    std::string piece(64 * 1024, 'a');
    const char* first_data = nullptr;
    size_t sent = 0;
    while (sent < length) {
        size_t used = parser.put(net::buffer(piece.data(), std::min(piece.size(), length - sent)), ec);
        ASSERT_FALSE(ec) << ec.message();
        sent += used;
        if (sent >= (1u << 20) && !first_data) first_data = parser.get().body().data();
    }
    ASSERT_TRUE(parser.is_done());
    EXPECT_EQ(parser.get().body().size(), length);
    EXPECT_EQ(parser.get().body().data(), first_data) << "past the first MiB the buffer never moves";
    EXPECT_GE(parser.get().body().capacity(), length + RequestBody::reader::kPaddingBytes);
}

TEST(RequestBody, ChunkedBodyKeepsAdmissionPadding) {
    error_code ec;
    http::request_parser<RequestBody> parser;
    parse(parser,
          "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
          "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
          ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(parser.is_done());
    EXPECT_EQ(parser.get().body(), "hello world");
    EXPECT_GE(parser.get().body().capacity(), 11 + RequestBody::reader::kPaddingBytes);
}

}  // namespace
}  // namespace dpgate::gateway
