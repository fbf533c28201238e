#include "gateway/http/forwarded_headers.hpp"

#include "gateway/http/head_fields.hpp"
#include "gateway/http/upstream_response_parser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

using namespace dpgate::gateway;

namespace {

HeadFields fieldsOf(const std::vector<std::pair<std::string, std::string>>& list) {
    HeadFields fields;
    for (const auto& [name, value] : list) fields.add(http::string_to_field(name), name, value);
    return fields;
}

std::string forwarded(const HeadFields& from, std::initializer_list<std::string_view> also_drop = {}) {
    std::string head;
    appendEndToEndFields(from, head, also_drop);
    return head;
}

}  // namespace

TEST(ForwardedHeaders, DropsHopByHopAndConnectionNamedFields) {
    const HeadFields from = fieldsOf({{"Content-Type", "application/json"},
                                      {"Connection", "keep-alive, X-Private"},
                                      {"Keep-Alive", "timeout=5"},
                                      {"Transfer-Encoding", "chunked"},
                                      {"TE", "trailers"},
                                      {"Upgrade", "h2c"},
                                      {"Proxy-Authorization", "Basic x"},
                                      {"x-private", "secret"},
                                      {"Authorization", "Bearer sk"},
                                      {"X-Session-ID", "abc"}});
    EXPECT_EQ(forwarded(from, {"authorization"}), "Content-Type: application/json\r\nX-Session-ID: abc\r\n");
}

TEST(ForwardedHeaders, KeepsRepeatedEndToEndFieldsInOrder) {
    const HeadFields from = fieldsOf({{"X-Tag", "a"}, {"Accept", "*/*"}, {"X-Tag", "b"}});
    EXPECT_EQ(forwarded(from), "X-Tag: a\r\nAccept: */*\r\nX-Tag: b\r\n");
}

TEST(ForwardedHeaders, AlsoDropMatchesNamesInAnyCaseAndOnlyWholeNames) {
    const HeadFields from = fieldsOf({{"X-REQUEST-ID", "client's"}, {"X-Request-IDs", "kept"}, {"Host", "h"}});
    EXPECT_EQ(forwarded(from, {"x-request-id", "host"}), "X-Request-IDs: kept\r\n");
}

// The copy checks hop-by-hop fields by Beast's field code: every name the
// string check knows, in any case, must be dropped that way too.
TEST(ForwardedHeaders, DropsEveryHopByHopNameInAnyCase) {
    for (const char* name : {"connection", "KEEP-ALIVE", "Proxy-Connection", "te", "Trailer", "transfer-encoding",
                             "UPGRADE", "proxy-authenticate", "Proxy-Authorization"}) {
        ASSERT_TRUE(isHopByHop(name)) << name;
        EXPECT_EQ(forwarded(fieldsOf({{name, "x"}, {"X-Kept", "y"}})), "X-Kept: y\r\n") << name;
    }
}

TEST(ForwardedHeaders, TheDropListMatchesNamesWithAndWithoutAFieldCodeInAnyCase) {
    const FieldNames drop = {"host", "x-request-id", "Content-Length"};
    EXPECT_TRUE(drop.contains(http::field::host, "HOST"));
    EXPECT_TRUE(drop.contains(http::field::unknown, "X-Request-Id"));
    EXPECT_FALSE(drop.contains(http::field::unknown, "X-Request-Idx"));
    EXPECT_FALSE(drop.contains(http::field::content_type, "Content-Type"));
    const HeadFields from = fieldsOf({{"HOST", "a"},
                                      {"X-Request-Id", "r"},
                                      {"X-Other", "o"},
                                      {"content-length", "5"},
                                      {"Content-Type", "text/plain"}});
    EXPECT_EQ(forwarded(from, {"host", "x-request-id", "Content-Length"}),
              "X-Other: o\r\nContent-Type: text/plain\r\n");
}

// Fields of a parsed head lie in its copy as they came; those written
// "Name: value" are copied as whole lines, runs of them at once. The lines
// are the same as field by field, whatever the spacing, and a dropped field
// in between ends a run.
TEST(ForwardedHeaders, ParsedLinesAreCopiedWholeAndTheSameAsFieldByField) {
    const std::string wire =
        "HTTP/1.1 200 OK\r\nServer: sim\r\nContent-Type: application/json\r\nX-Sim-DP-Rank: 3\r\n"
        "Content-Length: 0\r\nX-A:tight\r\nX-B:  wide  \r\nX-C: \r\nX-D:\t\ttab\r\nX-E: e\r\nConnection: keep-alive\r\n"
        "X-F: f\r\nX-G: g\r\n\r\n";
    UpstreamResponseParser parser;
    error_code ec;
    parser.put(net::buffer(wire), ec);
    ASSERT_FALSE(ec) << ec.message();
    const HeadFields& parsed = parser.fields();
    HeadFields added;
    for (size_t i = 0; i < parsed.size(); ++i)
        added.add(parsed.at(i).name, parsed.nameOf(parsed.at(i)), parsed.valueOf(parsed.at(i)));
    const std::string expected =
        "Server: sim\r\nContent-Type: application/json\r\nX-Sim-DP-Rank: 3\r\nX-A: tight\r\nX-B: wide\r\n"
        "X-C: \r\nX-D: tab\r\nX-E: e\r\nX-F: f\r\nX-G: g\r\n";
    EXPECT_EQ(forwarded(parsed, {"content-length"}), expected);
    EXPECT_EQ(forwarded(added, {"content-length"}), expected);
    EXPECT_EQ(parsed.lineOf(parsed.at(0)), "Server: sim\r\n");
    EXPECT_EQ(parsed.lineOf(parsed.at(4)), "");  // X-A:tight
    EXPECT_EQ(parsed.lineOf(parsed.at(6)), "X-C: \r\n");
    EXPECT_EQ(added.lineOf(added.at(0)), "");
}
