#include "gateway/request_framing.hpp"

#include <gtest/gtest.h>

using dpgate::gateway::checkRequestFraming;
using dpgate::gateway::findHeaderEnd;
using dpgate::gateway::FramingLimits;

namespace {

int statusOf(const std::string& head, FramingLimits limits = {}) { return checkRequestFraming(head, limits).status; }

}  // namespace

TEST(FindHeaderEnd, FindsTheBlankLine) {
    bool bad = false;
    std::string r = "POST / HTTP/1.1\r\nHost: a\r\n\r\nbody";
    EXPECT_EQ(findHeaderEnd(r, bad), r.size() - 4);
    EXPECT_FALSE(bad);
    EXPECT_EQ(findHeaderEnd("POST / HTTP/1.1\r\nHost: a\r\n", bad), 0u);
    EXPECT_FALSE(bad);
}

TEST(FindHeaderEnd, BareLineFeedIsMalformed) {
    bool bad = false;
    EXPECT_EQ(findHeaderEnd("POST / HTTP/1.1\nHost: a\n\n", bad), 0u);
    EXPECT_TRUE(bad);
}

TEST(RequestFraming, PlainRequestsPass) {
    EXPECT_EQ(statusOf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n"), 0);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"), 0);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:  Chunked \r\n\r\n"), 0);
    EXPECT_EQ(statusOf("GET /health HTTP/1.0\r\n\r\n"), 0);
    // The same length twice is one length (RFC 9112 6.3).
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"), 0);
}

TEST(RequestFraming, ContentLengthWithTransferEncodingEitherOrder) {
    auto v = checkRequestFraming("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", {});
    EXPECT_EQ(v.status, 400);
    EXPECT_NE(v.message.find("both Content-Length and Transfer-Encoding"), std::string::npos);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"), 400);
}

TEST(RequestFraming, DifferentContentLengths) {
    auto v = checkRequestFraming("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", {});
    EXPECT_EQ(v.status, 400);
    EXPECT_NE(v.message.find("conflicting Content-Length"), std::string::npos);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"), 400);
}

TEST(RequestFraming, TransferEncodingMustEndInChunked) {
    auto v = checkRequestFraming("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", {});
    EXPECT_EQ(v.status, 400);
    EXPECT_NE(v.message.find("must end in chunked"), std::string::npos);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n"), 400);
}

TEST(RequestFraming, ChunkedOnHttp10) {
    auto v = checkRequestFraming("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", {});
    EXPECT_EQ(v.status, 400);
    EXPECT_NE(v.message.find("HTTP/1.0"), std::string::npos);
}

TEST(RequestFraming, ObsFold) {
    auto v = checkRequestFraming("POST / HTTP/1.1\r\nX-A: 1\r\n  continued\r\nContent-Length: 0\r\n\r\n", {});
    EXPECT_EQ(v.status, 400);
    EXPECT_NE(v.message.find("obs-fold"), std::string::npos);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\tchunked\r\n\r\n"), 400);
}

TEST(RequestFraming, WhitespaceBeforeColonAndBadNames) {
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\n: nameless\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nno colon here\r\n\r\n"), 400);
}

TEST(RequestFraming, VersionsAndHosts) {
    EXPECT_EQ(statusOf("POST / HTTP/2.0\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("POST /\r\n\r\n"), 400);
    EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
}

TEST(RequestFraming, HeaderLimits) {
    FramingLimits limits{64, 3};
    std::string many = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
    auto v = checkRequestFraming(many, {4096, 3});
    EXPECT_EQ(v.status, 431);
    EXPECT_NE(v.message.find("more than 3 header fields"), std::string::npos);
    std::string big = "GET / HTTP/1.1\r\nX-Big: " + std::string(100, 'x') + "\r\n\r\n";
    EXPECT_EQ(statusOf(big, limits), 431);
}

TEST(RequestFraming, ReportsTheDeclaredContentLength) {
    auto v = checkRequestFraming("POST / HTTP/1.1\r\nContent-Length: 300000000\r\n\r\n", {});
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v.has_content_length);
    EXPECT_EQ(v.content_length, 300000000u);
    auto chunked = checkRequestFraming("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", {});
    EXPECT_FALSE(chunked.has_content_length);
    auto max = checkRequestFraming("POST / HTTP/1.1\r\nContent-Length: 9999999999999999999\r\n\r\n", {});
    EXPECT_EQ(max.content_length, 9999999999999999999ull);
}
