#include "gateway/http/client_request.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dpgate::gateway {
namespace {

// The whole input at once, as the session gives it: the head, then the
// body; the parser is done, failed or waiting for more. Returns the bytes used.
size_t parse(ClientRequestParser& parser, std::string_view bytes) {
    size_t used = parser.put(bytes);
    if (parser.is_header_done() && !parser.is_done() && !parser.failed()) used += parser.put(bytes.substr(used));
    return used;
}

// The refusal of a request given whole, or 0 when it is accepted.
unsigned statusOf(std::string_view bytes, RequestLimits limits = {}) {
    ClientRequestParser parser(limits);
    parse(parser, bytes);
    return parser.failed() ? parser.refusal().status : 0;
}

std::string messageOf(std::string_view bytes, RequestLimits limits = {}) {
    ClientRequestParser parser(limits);
    parse(parser, bytes);
    return parser.refusal().message;
}

TEST(ClientRequest, RequestLineFieldsAndBody) {
    ClientRequestParser parser;
    const std::string wire =
        "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: gw\r\nAuthorization:  Bearer sk-1 \r\n"
        "X-Session-ID: s1\r\nX-Tag: a\r\nx-tag: b\r\nContent-Length: 2\r\n\r\n{}";
    ASSERT_EQ(parse(parser, wire), wire.size());
    ASSERT_TRUE(parser.is_done());
    const ClientRequest request = parser.release();
    EXPECT_EQ(request.method(), http::verb::post);
    EXPECT_EQ(request.method_string(), "POST");
    EXPECT_EQ(request.target(), "/v1/chat/completions?x=1");
    EXPECT_EQ(request.version(), 11u);
    EXPECT_TRUE(request.keep_alive());
    EXPECT_EQ(request[http::field::authorization], "Bearer sk-1");  // trimmed
    EXPECT_EQ(request["x-session-id"], "s1");                       // any case
    EXPECT_EQ(request["X-Tag"], "a");                               // the first of a repeated name
    EXPECT_EQ(request.fields().size(), 6u);
    EXPECT_EQ(request.fields().nameOf(request.fields().at(4)), "x-tag");
    EXPECT_EQ(request.fields().at(0).name, http::field::host);
    EXPECT_EQ(request["X-Missing"], "");
    EXPECT_FALSE(request.fields().has(http::field::expect));
    EXPECT_EQ(request.body(), "{}");
}

TEST(ClientRequest, NothingIsUsedUntilTheHeadIsWholeThenTheBodyAsItComes) {
    const std::string wire = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    const size_t head = wire.size() - 5;
    ClientRequestParser parser;
    EXPECT_EQ(parser.put(std::string_view(wire).substr(0, head - 1)), 0u);
    EXPECT_FALSE(parser.is_header_done());
    // The call that completes the head stops there, body bytes or not.
    EXPECT_EQ(parser.put(std::string_view(wire).substr(0, head + 2)), head);
    EXPECT_TRUE(parser.is_header_done());
    EXPECT_EQ(parser.content_length(), 5u);
    EXPECT_EQ(parser.get().body().capacity(), std::string().capacity()) << "nothing reserved before the body starts";
    EXPECT_EQ(parser.put("he"), 2u);
    EXPECT_EQ(parser.put("llo"), 3u);
    EXPECT_TRUE(parser.is_done());
    EXPECT_EQ(parser.get().body(), "hello");
}

TEST(ClientRequest, ABodyTakesItsLengthFromTheBudgetWhenItStartsAndGivesItBackWithTheRequest) {
    BodyBudget budget;
    RequestLimits limits;
    limits.body_budget = &budget;
    limits.max_buffered_body_bytes = 10;
    {
        ClientRequestParser parser(limits);
        const std::string wire = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n";
        ASSERT_EQ(parser.put(wire), wire.size());
        EXPECT_EQ(budget.heldBytes(), 0u) << "the head alone takes nothing";
        EXPECT_EQ(parser.put(""), 0u);
        EXPECT_EQ(budget.heldBytes(), 6u) << "the first body call takes the whole length, before a byte";
        parser.put("abcdef");
        ASSERT_TRUE(parser.is_done());
        // A second body of 6 would go beyond 10: refused before a byte is read.
        ClientRequestParser second(limits);
        ASSERT_EQ(second.put(wire), wire.size());
        EXPECT_EQ(second.put("abc"), 0u);
        ASSERT_TRUE(second.failed());
        EXPECT_EQ(second.refusal().status, 503u);
        EXPECT_NE(second.refusal().message.find("limits.max_buffered_body_bytes (10 bytes)"), std::string::npos);
        EXPECT_EQ(second.get().body().capacity(), std::string().capacity());
        EXPECT_EQ(budget.heldBytes(), 6u);
        ClientRequest request = parser.release();
        EXPECT_EQ(budget.heldBytes(), 6u) << "the share moves with the body";
    }
    EXPECT_EQ(budget.heldBytes(), 0u) << "given back once, when the body is freed";
}

TEST(ClientRequest, AChunkedBodyTakesEachChunkFromTheBudgetAtItsSizeLine) {
    BodyBudget budget;
    RequestLimits limits;
    limits.body_budget = &budget;
    limits.max_buffered_body_bytes = 8;
    ClientRequestParser parser(limits);
    const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    ASSERT_EQ(parser.put(head), head.size());
    EXPECT_EQ(parser.put("5\r\nhello\r\n"), 10u);
    EXPECT_EQ(budget.heldBytes(), 5u);
    // Four more would be 9: refused at the size line, before its data.
    parser.put("4\r\n");
    ASSERT_TRUE(parser.failed());
    EXPECT_EQ(parser.refusal().status, 503u);
    EXPECT_NE(parser.refusal().message.find("this chunk of 4 bytes"), std::string::npos);
    EXPECT_EQ(budget.heldBytes(), 5u);
}

TEST(ClientRequest, ADiscardedBodyIsReadThroughWithoutBeingKeptOrCharged) {
    BodyBudget budget;
    RequestLimits limits;
    limits.body_budget = &budget;
    limits.max_buffered_body_bytes = 4;
    for (const std::string& body : {std::string("Content-Length: 10\r\n\r\n0123456789"),
                                    std::string("Transfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n0\r\n\r\n")}) {
        const std::string wire = "POST / HTTP/1.1\r\nHost: x\r\n" + body + "GET /next";
        ClientRequestParser parser(limits);
        size_t used = parser.put(wire);
        parser.discardBody();
        used += parser.put(std::string_view(wire).substr(used));
        ASSERT_TRUE(parser.is_done()) << parser.refusal().message;
        EXPECT_EQ(std::string_view(wire).substr(used), "GET /next") << "the next request stays";
        EXPECT_EQ(parser.get().body(), "");
        EXPECT_EQ(parser.get().body().capacity(), std::string().capacity());
        EXPECT_EQ(budget.heldBytes(), 0u);
    }
}

TEST(ClientRequest, APipelinedRequestIsLeftForTheNextParser) {
    const std::string first = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    const std::string second = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    ClientRequestParser parser;
    EXPECT_EQ(parse(parser, first + second), first.size());
    ClientRequestParser next;
    EXPECT_EQ(next.put(second), second.size());
    EXPECT_TRUE(next.is_done());
    EXPECT_EQ(next.get().target(), "/health");
}

TEST(ClientRequest, KeepAliveFollowsTheVersionAndConnection) {
    struct Case {
        const char* head;
        bool keep_alive;
    };
    for (const Case& c : {Case{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true},
                          Case{"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false},
                          Case{"GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, Close\r\n\r\n", false},
                          Case{"GET / HTTP/1.1\r\nHost: x\r\nProxy-Connection: close\r\n\r\n", false},
                          Case{"GET / HTTP/1.0\r\nHost: x\r\n\r\n", false},
                          Case{"GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", true}}) {
        ClientRequestParser parser;
        parse(parser, c.head);
        ASSERT_TRUE(parser.is_done()) << c.head;
        EXPECT_EQ(parser.release().keep_alive(), c.keep_alive) << c.head;
    }
}

TEST(ClientRequest, MalformedHeadsAreRefusedAsMalformed) {
    for (const char* bad :
         {"POST / HTTP/1.1\r\nBad Name: x\r\n\r\n", "P@ST / HTTP/1.1\r\n\r\n", "POST  / HTTP/1.1\r\n\r\n",
          "POST / HTTP/1.1 \r\n\r\n", "POST /\r\n\r\n", "POST / HTTP/2.0\r\n\r\n",
          "POST / HTTP/1.1\r\nX: a\x01z\r\n\r\n", "POST / HTTP/1.1\r\nX: a\r\rY: b\r\n\r\n",
          "POST / HTTP/1.1\r\nConnection: close keep-alive\r\n\r\n", "POST / HTTP/1.1\r\n: nameless\r\n\r\n",
          "POST / HTTP/1.1\r\nno colon here\r\n\r\n", "POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n"}) {
        ClientRequestParser parser;
        parse(parser, bad);
        ASSERT_TRUE(parser.failed()) << bad;
        EXPECT_EQ(parser.refusal().status, 400u) << bad;
        EXPECT_TRUE(parser.refusal().malformed) << bad;
    }
    EXPECT_NE(messageOf("POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n").find("whitespace before the colon"),
              std::string::npos);
    EXPECT_NE(messageOf("POST / HTTP/2.0\r\n\r\n").find("only HTTP/1.0 and HTTP/1.1"), std::string::npos);
}

TEST(ClientRequest, ABareLineFeedIsRefusedBeforeTheHeadEnds) {
    ClientRequestParser parser;
    EXPECT_EQ(parser.put("POST / HTTP/1.1\nHost: a\n"), 0u);
    ASSERT_TRUE(parser.failed());
    EXPECT_NE(parser.refusal().message.find("bare LF"), std::string::npos);
}

TEST(ClientRequest, PlainFramingsPass) {
    EXPECT_EQ(statusOf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"), 0u);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:  Chunked \r\n\r\n0\r\n\r\n"), 0u);
    EXPECT_EQ(statusOf("GET /health HTTP/1.0\r\n\r\n"), 0u);
    // The same length twice is one length (RFC 9112 6.3).
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n"), 0u);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length: 0, 0\r\n\r\n"), 0u);
}

TEST(ClientRequest, ContentLengthWithTransferEncodingEitherOrder) {
    EXPECT_NE(messageOf("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")
                  .find("both Content-Length and Transfer-Encoding"),
              std::string::npos);
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"), 400u);
}

TEST(ClientRequest, DifferentOrMalformedContentLengths) {
    EXPECT_NE(messageOf("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n").find("conflicting"),
              std::string::npos);
    for (const char* length : {"5, 6", "-1", "0x10", "99999999999999999999", "5,,5", ",5", "", "1x"})
        EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nContent-Length: " + std::string(length) + "\r\n\r\n"), 400u) << length;
}

TEST(ClientRequest, TransferEncodingMustBeALoneChunked) {
    EXPECT_NE(messageOf("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").find("must end in chunked"),
              std::string::npos);
    for (const char* coding : {"chunked, gzip", "gzip, chunked", "xchunked", "chunked,", ""})
        EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding: " + std::string(coding) + "\r\n\r\n"), 400u)
            << coding;
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n"), 400u);
    EXPECT_NE(messageOf("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").find("HTTP/1.0"), std::string::npos);
}

TEST(ClientRequest, ObsFoldAndTwoHostsAreRefusedOnPurpose) {
    ClientRequestParser parser;
    parse(parser, "POST / HTTP/1.1\r\nX-A: 1\r\n  continued\r\nContent-Length: 0\r\n\r\n");
    ASSERT_TRUE(parser.failed());
    EXPECT_NE(parser.refusal().message.find("obs-fold"), std::string::npos);
    EXPECT_FALSE(parser.refusal().malformed) << "well-formed HTTP/1.1, refused on purpose";
    EXPECT_EQ(statusOf("POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\tchunked\r\n\r\n"), 400u);
    EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400u);
}

TEST(ClientRequest, HeaderLimitsAre431) {
    const std::string many = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
    EXPECT_EQ(statusOf(many, {4096, 3}), 431u);
    EXPECT_NE(messageOf(many, {4096, 3}).find("more than 3 header fields"), std::string::npos);
    EXPECT_EQ(statusOf(many, {4096, 4}), 0u);
    const std::string big = "GET / HTTP/1.1\r\nX-Big: " + std::string(100, 'x') + "\r\n\r\n";
    EXPECT_EQ(statusOf(big, {64, 100}), 431u);
    // Before its end, too: a head that has outgrown the limit is not waited for.
    EXPECT_EQ(statusOf(big.substr(0, 80), {64, 100}), 431u);
}

TEST(ClientRequest, ADeclaredBodyOverTheLimitIsRefusedFromTheHead) {
    ClientRequestParser parser({64 * 1024, 100, 1000});
    parse(parser, "POST / HTTP/1.1\r\nContent-Length: 300000000\r\n\r\n");
    ASSERT_TRUE(parser.failed());
    EXPECT_EQ(parser.refusal().status, 413u);
    EXPECT_NE(parser.refusal().message.find("300000000 bytes"), std::string::npos);
    ClientRequestParser max;
    parse(max, "POST / HTTP/1.1\r\nContent-Length: 9999999999999999999\r\n\r\n");
    EXPECT_EQ(max.content_length(), 9999999999999999999ull);
}

TEST(ClientRequest, AnnouncedBodyReservesOneMebibyteNotItsLength) {
    ClientRequestParser parser;
    parse(parser, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200000000\r\n\r\n{");
    ASSERT_FALSE(parser.failed()) << parser.refusal().message;
    EXPECT_EQ(parser.get().body(), "{");
    EXPECT_LT(parser.get().body().capacity(), 2u << 20);
}

TEST(ClientRequest, ARealUploadGetsItsWholeLengthOnceHalfAMebibyteIsIn) {
    const size_t length = 3u << 20;
    ClientRequestParser parser;
    std::string head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n";
    ASSERT_EQ(parser.put(head), head.size());
    std::string piece(64 * 1024, 'a');
    const char* first_data = nullptr;
    size_t sent = 0;
    while (sent < length) {
        size_t used = parser.put(std::string_view(piece).substr(0, std::min(piece.size(), length - sent)));
        ASSERT_GT(used, 0u);
        sent += used;
        if (sent >= (1u << 20) && !first_data) first_data = parser.get().body().data();
    }
    ASSERT_TRUE(parser.is_done());
    EXPECT_EQ(parser.get().body().size(), length);
    EXPECT_EQ(parser.get().body().data(), first_data) << "past the first MiB the buffer never moves";
    EXPECT_GE(parser.get().body().capacity(), length + ClientRequestParser::kPaddingBytes);
}

TEST(ClientRequest, ChunkedBodyIsDecodedWithAdmissionPadding) {
    const std::string wire =
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: dropped\r\n\r\n";
    // Whole, and one byte at a time.
    for (size_t feed : {wire.size(), size_t(1)}) {
        ClientRequestParser parser;
        std::string pending;
        for (char c : wire) {
            pending += c;
            if (pending.size() < feed && pending.size() < wire.size()) continue;
            pending.erase(0, parse(parser, pending));
        }
        ASSERT_TRUE(parser.is_done()) << parser.refusal().message;
        EXPECT_TRUE(pending.empty());
        EXPECT_TRUE(parser.chunked());
        EXPECT_EQ(parser.get().body(), "hello world");
        EXPECT_GE(parser.get().body().capacity(), 11 + ClientRequestParser::kPaddingBytes);
        EXPECT_EQ(parser.get()["X-Trailer"], "") << "a trailer never stands in for a head field";
    }
}

TEST(ClientRequest, MalformedChunkedBodiesAreRefused) {
    const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const char* body :
         {"5\r\nhelloXX0\r\n\r\n", "\r\nhello\r\n0\r\n\r\n", "5 \r\nhello\r\n0\r\n\r\n", "5;\r\nhello\r\n0\r\n\r\n",
          "5;a=\r\nhello\r\n0\r\n\r\n", "5x\r\nhello\r\n0\r\n\r\n", "0\r\nContent-Length: 5\r\n\r\n",
          "0\r\nConnection: close\r\n\r\n", "0\r\nBad Name: x\r\n\r\n", "11111111111111111\r\n"}) {
        EXPECT_EQ(statusOf(head + body), 400u) << body;
    }
}

TEST(ClientRequest, ChunkedBodyOverTheLimitIs413) {
    const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    EXPECT_EQ(statusOf(head + "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", {4096, 100, 5}), 0u);
    EXPECT_EQ(statusOf(head + "3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", {4096, 100, 5}), 413u);
}

}  // namespace
}  // namespace dpgate::gateway
