#include "gateway/http/response_framing.hpp"
#include "gateway/http/upstream_response_parser.hpp"

#include <gtest/gtest.h>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <memory>
#include <string>
#include <vector>

using namespace dpgate::gateway;

namespace {

// Every write's bytes, in order, as the client would receive them.
std::string concat(const ResponseFraming::Buffers& buffers) {
    std::string out;
    for (const auto& b : buffers) out.append(static_cast<const char*>(b.data()), b.size());
    return out;
}

// Parses the bytes as a client does; fails the test on any framing error.
http::response<http::string_body> parse(const std::string& wire) {
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    error_code ec;
    size_t used = parser.put(net::buffer(wire), ec);
    EXPECT_FALSE(ec) << ec.message() << " in:\n" << wire;
    EXPECT_TRUE(parser.is_done()) << wire;
    EXPECT_EQ(used, wire.size()) << "bytes beyond the response:\n" << wire;
    return parser.release();
}

// A backend's answer head, parsed as the relay parses it (the body, chunked,
// not read).
std::unique_ptr<UpstreamResponseParser> upstreamFields() {
    const std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        "Connection: keep-alive, X-Hop\r\nX-Hop: private\r\nX-Request-ID: upstream-id\r\n"
        "X-Sim-DP-Rank: 3\r\nX-Dpgate-Route: spoofed/9\r\n\r\n";
    auto parser = std::make_unique<UpstreamResponseParser>();
    error_code ec;
    parser->put(net::buffer(head), ec);
    EXPECT_TRUE(parser->is_header_done()) << ec.message();
    return parser;
}

}  // namespace

TEST(ResponseFraming, ChunkedPiecesParseBackToTheBody) {
    ResponseFraming framing;
    framing.start(*upstreamFields(), 200, ResponseFraming::Body::chunked, 0, true, "req-1", "primary/3");
    std::string wire = concat(framing.next({}, false));  // the head alone, as for an event stream
    EXPECT_TRUE(framing.headSent());
    const std::vector<std::string> pieces = {"data: {\"a\":1}\n\n", std::string(70000, 'x'), "data: [DONE]\n\n"};
    for (size_t i = 0; i < pieces.size(); ++i) wire += concat(framing.next(pieces[i], i + 1 == pieces.size()));
    EXPECT_TRUE(framing.finished());
    auto response = parse(wire);
    EXPECT_EQ(response.result_int(), 200);
    EXPECT_EQ(response.body(), pieces[0] + pieces[1] + pieces[2]);
    EXPECT_EQ(response[http::field::content_type], "text/event-stream");
    EXPECT_EQ(response["X-Request-ID"], "req-1");  // dpgate's, not the backend's
    EXPECT_EQ(response.count("X-Request-ID"), 1u);
    EXPECT_EQ(response["X-Dpgate-Route"], "primary/3");
    EXPECT_EQ(response.count("X-Dpgate-Route"), 1u);
    EXPECT_EQ(response["X-Sim-DP-Rank"], "3");
    EXPECT_EQ(response.count("X-Hop"), 0u);
    EXPECT_EQ(response.count(http::field::content_length), 0u);
    EXPECT_TRUE(response.chunked());
    EXPECT_TRUE(response.keep_alive());
}

TEST(ResponseFraming, AnEmptyPieceNeverEndsAChunkedBody) {
    ResponseFraming framing;
    framing.start(UpstreamResponseParser{}, 200, ResponseFraming::Body::chunked, 0, true, "r", "b/0");
    std::string wire = concat(framing.next("abc", false));
    framing.next({}, false);
    EXPECT_TRUE(framing.empty());
    EXPECT_FALSE(framing.finished());
    wire += concat(framing.next({}, true));  // the end alone: the last chunk
    EXPECT_EQ(parse(wire).body(), "abc");
}

TEST(ResponseFraming, LengthBodyIsWrittenAsIsWithItsLength) {
    ResponseFraming framing;
    const std::string body = R"({"id":"x","choices":[]})";
    framing.start(UpstreamResponseParser{}, 200, ResponseFraming::Body::length, body.size(), false, "r", "standby/7");
    const std::string wire = concat(framing.next(body, true));
    EXPECT_TRUE(wire.ends_with("\r\n\r\n" + body));
    auto response = parse(wire);
    EXPECT_EQ(response.body(), body);
    EXPECT_EQ(response[http::field::content_length], std::to_string(body.size()));
    EXPECT_FALSE(response.keep_alive());
    EXPECT_EQ(response[http::field::connection], "close");
}

TEST(ResponseFraming, StatusLineCarriesTheCodeAndItsReason) {
    ResponseFraming framing;
    framing.start(UpstreamResponseParser{}, 204, ResponseFraming::Body::none, 0, true, "r", "b/0");
    EXPECT_TRUE(framing.finished());
    const std::string wire = concat(framing.next({}, true));
    EXPECT_TRUE(wire.starts_with("HTTP/1.1 204 No Content\r\n")) << wire;
    framing.start(UpstreamResponseParser{}, 597, ResponseFraming::Body::length, 0, true, "r", "b/0");
    EXPECT_TRUE(concat(framing.next({}, true)).starts_with("HTTP/1.1 597 Unknown\r\n"));
}
