// The relay's answer parser against Beast's own response parser: the same
// status, fields and body, whatever the framing and however the bytes and
// the body windows are cut.
#include "gateway/upstream_response_parser.hpp"

#include "gateway/parse_buffered.hpp"

#include <gtest/gtest.h>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <cctype>
#include <random>
#include <string>
#include <vector>

using namespace dpgate::gateway;

namespace {

// Beast's fields keep a repeated name's values together (a later one goes
// after the earlier ones); the relay's parser keeps wire order. Compared
// grouped by name, each name's values in order.
std::vector<std::pair<std::string, std::string>> grouped(std::vector<std::pair<std::string, std::string>> fields) {
    auto lower = [](std::string s) {
        for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::stable_sort(fields.begin(), fields.end(),
                     [&](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
    return fields;
}

struct Parsed {
    unsigned status = 0;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    bool keep_alive = false;
    std::string error;
};

// Feeds `wire` in pieces of at most `feed` bytes, taking the body through
// windows of at most `window` bytes, as Relay::relayAnswer does.
Parsed parseWithRelayParser(const std::string& wire, size_t feed, size_t window) {
    UpstreamResponseParser parser;
    parser.body_limit(boost::none);
    beast::flat_buffer buffer;
    Parsed out;
    std::vector<char> room(window);
    size_t fed = 0;
    while (!parser.is_done()) {
        // Until the header is parsed there is no window: parsing stops
        // after the header with the body bytes left in the buffer.
        const bool window_set = parser.is_header_done();
        if (window_set) {
            parser.body().data = room.data();
            parser.body().size = room.size();
        }
        error_code ec = parseBuffered(parser, buffer);
        if (ec) {
            out.error = ec.message();
            return out;
        }
        if (window_set) out.body.append(room.data(), room.size() - parser.body().size);
        if (!window_set && parser.is_header_done()) continue;
        if (parser.is_done()) break;
        if (parser.is_header_done() && parser.body().size == 0) continue;  // a window filled: next one
        if (fed == wire.size()) {
            if (parser.got_some()) parser.put_eof(ec);
            else ec = http::error::end_of_stream;
            if (ec) out.error = ec.message();
            break;
        }
        const size_t n = std::min(feed, wire.size() - fed);
        auto into = buffer.prepare(n);
        std::memcpy(into.data(), wire.data() + fed, n);
        buffer.commit(n);
        fed += n;
    }
    out.status = parser.status();
    for (size_t i = 0; i < parser.fieldCount(); ++i)
        out.fields.emplace_back(parser.nameOf(parser.field(i)), parser.valueOf(parser.field(i)));
    out.keep_alive = parser.keep_alive();
    return out;
}

Parsed parseWithBeast(const std::string& wire) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    parser.eager(true);
    error_code ec;
    Parsed out;
    parser.put(net::buffer(wire), ec);
    if (ec == http::error::need_more) ec = {};  // all of the input was used: its end decides
    if (!ec && !parser.is_done()) {
        if (parser.got_some()) parser.put_eof(ec);  // as Beast's reads do: nothing at all is end_of_stream
        else ec = http::error::end_of_stream;
    }
    if (ec) {
        out.error = ec.message();
        return out;
    }
    const auto& m = parser.get();
    out.status = m.result_int();
    for (const auto& f : m) out.fields.emplace_back(f.name_string(), f.value());
    out.body = m.body();
    out.keep_alive = parser.keep_alive();
    return out;
}

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
        const Parsed expected = parseWithBeast(wire);
        for (int round = 0; round < 60; ++round) {
            const size_t feed = 1 + random() % (round < 30 ? 16 : 4096);
            const size_t window = 1 + random() % (round % 2 ? 7 : 9000);
            const Parsed got = parseWithRelayParser(wire, feed, window);
            EXPECT_EQ(got.error.empty(), expected.error.empty()) << wire << "\n"
                                                                 << got.error << " | " << expected.error;
            if (!expected.error.empty()) continue;
            EXPECT_EQ(got.status, expected.status) << wire;
            EXPECT_EQ(grouped(got.fields), grouped(expected.fields)) << wire;
            EXPECT_EQ(got.body, expected.body) << wire << " feed " << feed << " window " << window;
            EXPECT_EQ(got.keep_alive, expected.keep_alive) << wire;
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
    EXPECT_EQ(parser.fieldCount(), 5u);
}
