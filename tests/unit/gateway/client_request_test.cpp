#include "gateway/client_request.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dpgate::gateway {
namespace {

void parse(ClientRequestParser& parser, const std::string& bytes, error_code& ec) {
    parser.body_limit(1ull << 40);
    parser.eager(true);
    parser.put(net::buffer(bytes), ec);
}

TEST(ClientRequest, RequestLineFieldsAndBody) {
    error_code ec;
    ClientRequestParser parser;
    parse(parser,
          "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-1\r\n"
          "X-Session-ID: s1\r\nX-Tag: a\r\nx-tag: b\r\nContent-Length: 2\r\n\r\n{}",
          ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(parser.is_done());
    const ClientRequest request = parser.release();
    EXPECT_EQ(request.method(), http::verb::post);
    EXPECT_EQ(request.method_string(), "POST");
    EXPECT_EQ(request.target(), "/v1/chat/completions?x=1");
    EXPECT_EQ(request.version(), 11u);
    EXPECT_TRUE(request.keep_alive());
    EXPECT_EQ(request[http::field::authorization], "Bearer sk-1");
    EXPECT_EQ(request["x-session-id"], "s1");  // any case
    EXPECT_EQ(request["X-Tag"], "a");          // the first of a repeated name
    EXPECT_EQ(request.fields().size(), 6u);
    EXPECT_EQ(request.fields().nameOf(request.fields().at(4)), "x-tag");
    EXPECT_EQ(request["X-Missing"], "");
    EXPECT_FALSE(request.fields().has(http::field::expect));
    EXPECT_EQ(request.body(), "{}");
}

TEST(ClientRequest, KeepAliveFollowsTheVersionAndConnection) {
    struct Case {
        const char* head;
        bool keep_alive;
    };
    for (const Case& c : {Case{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true},
                          Case{"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false},
                          Case{"GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, Close\r\n\r\n", false},
                          Case{"GET / HTTP/1.0\r\nHost: x\r\n\r\n", false},
                          Case{"GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", true}}) {
        error_code ec;
        ClientRequestParser parser;
        parse(parser, c.head, ec);
        ASSERT_FALSE(ec) << c.head;
        ASSERT_TRUE(parser.is_done()) << c.head;
        EXPECT_EQ(parser.release().keep_alive(), c.keep_alive) << c.head;
    }
}

TEST(ClientRequest, MalformedHeadsAreErrors) {
    for (const char* bad :
         {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", "POST / HTTP/1.1\r\nBad Name: x\r\n\r\n",
          "P@ST / HTTP/1.1\r\n\r\n", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"}) {
        error_code ec;
        ClientRequestParser parser;
        parse(parser, bad, ec);
        EXPECT_TRUE(ec) << bad;
    }
}

TEST(ClientRequest, AnnouncedBodyReservesOneMebibyteNotItsLength) {
    error_code ec;
    ClientRequestParser parser;
    parse(parser, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200000000\r\n\r\n{", ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(parser.get().body(), "{");
    EXPECT_LT(parser.get().body().capacity(), 2u << 20);
}

TEST(ClientRequest, ARealUploadGetsItsWholeLengthOnceHalfAMebibyteIsIn) {
    const size_t length = 3u << 20;
    ClientRequestParser parser;
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
    EXPECT_GE(parser.get().body().capacity(), length + ClientRequestParser::kPaddingBytes);
}

TEST(ClientRequest, ChunkedBodyKeepsAdmissionPadding) {
    error_code ec;
    ClientRequestParser parser;
    parse(parser,
          "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
          "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
          ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(parser.is_done());
    EXPECT_EQ(parser.get().body(), "hello world");
    EXPECT_GE(parser.get().body().capacity(), 11 + ClientRequestParser::kPaddingBytes);
}

TEST(ClientRequest, BodyLimitIsEnforced) {
    error_code ec;
    ClientRequestParser parser;
    parser.body_limit(4);
    parser.put(net::buffer(std::string("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")), ec);
    EXPECT_EQ(ec, http::error::body_limit);
}

}  // namespace
}  // namespace dpgate::gateway
