// The relay's answer parser against Beast's own response parser: the same
// status, fields and body, whatever the framing and however the bytes and
// the body windows are cut.
#include "gateway/upstream_response_parser.hpp"

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
