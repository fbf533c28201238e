// The relay's answer parser against Beast's own response parser: the same
// status, fields and body, whatever the framing and however the bytes and
// the body windows are cut.
#include "gateway/http/upstream_response_parser.hpp"

#include "tests/fuzz/upstream_response/two_parsers.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

using namespace dpgate::gateway;
using namespace dpgate::gateway::test;

namespace {

std::string chunked(const std::vector<std::string>& pieces) {
    std::string wire;
    char size[32];
    for (const std::string& p : pieces) {
        std::snprintf(size, sizeof size, "%zx;ext=1\r\n", p.size());
        wire += size + p + "\r\n";
    }
    return wire + "0\r\nTrailer-Field: t\r\n\r\n";
}

}  // namespace

TEST(UpstreamResponseParser, MatchesBeastOnEveryFramingAndCut) {
    const std::string json = R"({"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3}})";
    const std::vector<std::string> answers = {
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(json.size()) +
            "\r\nX-Sim-DP-Rank: 3\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n" + json,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
            chunked({"data: {\"a\":1}\n\n", std::string(5000, 'x'), "data: [DONE]\n\n"}),
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbody until the connection closes",
        "HTTP/1.1 204 No Content\r\nX-Empty:\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",  // refused by both
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",              // a bad chunk size
    };
    std::mt19937 random(7);
    for (const std::string& wire : answers) {
        const ParsedAnswer expected = parseWithBeast(wire);
        for (int round = 0; round < 60; ++round) {
            const size_t feed = 1 + random() % (round < 30 ? 16 : 4096);
            const size_t window = 1 + random() % (round % 2 ? 7 : 9000);
            const ParsedAnswer got = parseAsTheRelay(wire, feed, window);
            EXPECT_EQ(got.failed, expected.failed) << wire;
            if (expected.failed) continue;
            EXPECT_EQ(got.status, expected.status) << wire;
            EXPECT_EQ(grouped(got.fields), grouped(expected.fields)) << wire;
            EXPECT_EQ(got.body, expected.body) << wire << " feed " << feed << " window " << window;
            EXPECT_EQ(got.keep_alive, expected.keep_alive) << wire;
            EXPECT_TRUE(sameAnswer(got, expected)) << wire;
        }
    }
}

TEST(UpstreamResponseParser, LooksUpFieldsByIdAndByName) {
    UpstreamResponseParser parser;
    const std::string head =
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nX-Custom: one\r\nx-custom: two\r\n"
        "Content-Type: application/json\r\nContent-Length: 0\r\n\r\n";
    error_code ec;
    parser.put(net::buffer(head), ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(parser.is_done());
    EXPECT_EQ(parser.status(), 429u);
    EXPECT_TRUE(parser.has(http::field::retry_after));
    EXPECT_EQ(parser[http::field::retry_after], "3");
    EXPECT_EQ(parser[http::field::content_type], "application/json");
    EXPECT_EQ(parser["X-CUSTOM"], "one");  // the first of a repeated name
    EXPECT_EQ(parser["x-missing"], "");
    EXPECT_FALSE(parser.has(http::field::set_cookie));
    EXPECT_EQ(parser.fields().size(), 5u);
}

TEST(UpstreamResponseParser, RefusesOnPurposeWhatItCouldNotRelayFaithfully) {
    for (const std::string& wire : {
             std::string("HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n"),
             // Folded where the first piece alone would be malformed: the fold decides.
             std::string("HTTP/1.1 200 OK\r\nContent-Length:\r\n 5\r\n\r\nhello"),
             std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T:\r\n t\r\n\r\n"),
             std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
             std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 ; a=\"q\"\r\nhello\r\n0\r\n\r\n"),
         }) {
        const ParsedAnswer got = parseAsTheRelay(wire, wire.size(), 64);
        EXPECT_TRUE(got.failed && got.refused) << wire;
        EXPECT_FALSE(parseWithBeast(wire).failed) << "Beast relays it: " << wire;
    }
    // Malformed answers are not "refused": both parsers fail them.
    const std::string bad = "HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx";
    const ParsedAnswer got = parseAsTheRelay(bad, bad.size(), 64);
    EXPECT_TRUE(got.failed && !got.refused);
    EXPECT_TRUE(parseWithBeast(bad).failed);
}

TEST(UpstreamResponseParser, ABodyToTheCloseEndsAtTheCloseAndIsNotKeptAlive) {
    const std::string wire = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close";
    const ParsedAnswer got = parseAsTheRelay(wire, 5, 3);
    ASSERT_FALSE(got.failed);
    EXPECT_EQ(got.body, "until the close");
    EXPECT_FALSE(got.keep_alive);
    const std::string cut = "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nshort";
    EXPECT_TRUE(parseAsTheRelay(cut, 7, 3).failed);
}

TEST(UpstreamResponseParser, InterimAnswersArePassedOverForTheFinalOne) {
    const std::string final_answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    const std::vector<std::string> interims = {
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
        "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 199 Whatever\r\nX-A: 1\r\n\r\n",
        // No body after a 1xx, whatever its framing fields say (RFC 9112 6.3).
        "HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n",
        "HTTP/1.1 103 Early Hints\r\nTransfer-Encoding: chunked\r\n\r\n",
        // The final answer's fields decide the connection, not an interim one's.
        "HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\n",
        "HTTP/1.0 100 Continue\r\n\r\n",
    };
    const ParsedAnswer alone = parseAsTheRelay(final_answer, final_answer.size(), 64);
    ASSERT_FALSE(alone.failed);
    std::mt19937 random(11);
    for (const std::string& interim : interims) {
        const std::string wire = interim + final_answer;
        for (int round = 0; round < 40; ++round) {
            const size_t feed = 1 + random() % (round < 20 ? 8 : 512);
            const ParsedAnswer got = parseAsTheRelay(wire, feed, 1 + random() % 5);
            ASSERT_FALSE(got.failed) << wire << " feed " << feed;
            EXPECT_EQ(got.status, 200u) << wire;
            EXPECT_EQ(grouped(got.fields), grouped(alone.fields)) << wire;
            EXPECT_EQ(got.body, "{}") << wire;
            EXPECT_TRUE(got.keep_alive) << wire;
            EXPECT_TRUE(sameAnswer(got, parseWithBeast(wire))) << wire;
        }
    }
}

TEST(UpstreamResponseParser, AnInterimHeadAloneIsNoAnswer) {
    // The connection closes after a 100: the answer was cut, not a 100.
    const std::string wire = "HTTP/1.1 100 Continue\r\n\r\n";
    UpstreamResponseParser parser;
    error_code ec;
    EXPECT_EQ(parser.put(net::buffer(wire), ec), wire.size());
    EXPECT_EQ(ec, http::error::need_more);
    EXPECT_FALSE(parser.is_header_done());
    EXPECT_TRUE(parser.got_some());
    parser.put_eof(ec);
    EXPECT_EQ(ec, http::error::partial_message);
}

TEST(UpstreamResponseParser, RefusesASwitchOfProtocols) {
    for (const std::string& wire : {
             std::string("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"),
             std::string("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n\r\nHTTP/1.1 200 OK\r\n"
                         "Content-Length: 0\r\n\r\n"),
         }) {
        const ParsedAnswer got = parseAsTheRelay(wire, 7, 64);
        EXPECT_TRUE(got.failed && got.refused) << wire;
    }
}

TEST(UpstreamResponseParser, EndlessInterimHeadsReachTheHeadLimit) {
    const std::string interim = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n";
    std::string wire;
    while (wire.size() <= UpstreamResponseParser::kMaxHeadBytes) wire += interim;
    wire += "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    for (size_t feed : {size_t(1000), size_t(16384), wire.size()}) {
        const ParsedAnswer got = parseAsTheRelay(wire, feed, 64);
        EXPECT_TRUE(got.failed && got.refused) << feed;
    }
    // Under the limit together, they pass.
    std::string fewer;
    for (int i = 0; i < 100; ++i) fewer += interim;
    fewer += "HTTP/1.1 204 No Content\r\n\r\n";
    const ParsedAnswer got = parseAsTheRelay(fewer, 333, 64);
    ASSERT_FALSE(got.failed);
    EXPECT_EQ(got.status, 204u);
}

TEST(UpstreamResponseParser, StopsAtTheEndOfTheAnswerAndLeavesWhatFollows) {
    // Bytes after the answer (a second, unasked-for answer) stay in the
    // buffer: the relay must then not keep the connection (UpstreamExchange::release).
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    for (const std::string& extra :
         {std::string("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nother"), std::string("x"), std::string("\r\n")}) {
        UpstreamResponseParser parser;
        beast::flat_buffer buffer;
        const std::string wire = answer + extra;
        std::memcpy(buffer.prepare(wire.size()).data(), wire.data(), wire.size());
        buffer.commit(wire.size());
        char room[16];
        ASSERT_FALSE(parseBuffered(parser, buffer));
        ASSERT_TRUE(parser.is_header_done());
        parser.body() = {room, sizeof room};
        ASSERT_FALSE(parseBuffered(parser, buffer));
        EXPECT_TRUE(parser.is_done());
        EXPECT_EQ(std::string_view(room, 2), "{}");
        EXPECT_EQ(buffer.size(), extra.size());
    }
}
