#include "gateway/forwarded_headers.hpp"

#include "gateway/head_fields.hpp"

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
