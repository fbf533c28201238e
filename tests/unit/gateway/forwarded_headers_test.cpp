#include "gateway/forwarded_headers.hpp"

#include <gtest/gtest.h>

using namespace dpgate::gateway;

TEST(ForwardedHeaders, DropsHopByHopAndConnectionNamedFields) {
    http::fields from;
    from.insert("Content-Type", "application/json");
    from.insert("Connection", "keep-alive, X-Private");
    from.insert("Keep-Alive", "timeout=5");
    from.insert("Transfer-Encoding", "chunked");
    from.insert("TE", "trailers");
    from.insert("Upgrade", "h2c");
    from.insert("Proxy-Authorization", "Basic x");
    from.insert("X-Private", "secret");
    from.insert("Authorization", "Bearer sk");
    from.insert("X-Session-ID", "abc");
    http::fields to;
    copyEndToEndFields(from, to, {"authorization"});
    EXPECT_EQ(to["Content-Type"], "application/json");
    EXPECT_EQ(to["X-Session-ID"], "abc");
    for (const char* gone : {"Connection", "Keep-Alive", "Transfer-Encoding", "TE", "Upgrade", "Proxy-Authorization",
                             "X-Private", "Authorization"})
        EXPECT_EQ(to.count(gone), 0u) << gone;
}

TEST(ForwardedHeaders, KeepsRepeatedEndToEndFields) {
    http::fields from;
    from.insert("X-Tag", "a");
    from.insert("X-Tag", "b");
    http::fields to;
    copyEndToEndFields(from, to);
    EXPECT_EQ(to.count("X-Tag"), 2u);
}

// The copy checks hop-by-hop fields by Beast's field code: every name the
// string check knows, in any case, must be dropped that way too.
TEST(ForwardedHeaders, DropsEveryHopByHopNameInAnyCase) {
    for (const char* name : {"connection", "KEEP-ALIVE", "Proxy-Connection", "te", "Trailer", "transfer-encoding",
                             "UPGRADE", "proxy-authenticate", "Proxy-Authorization"}) {
        ASSERT_TRUE(isHopByHop(name)) << name;
        http::fields from;
        from.insert(name, "x");
        from.insert("X-Kept", "y");
        http::fields to;
        copyEndToEndFields(from, to);
        EXPECT_EQ(to.count(name), 0u) << name;
        EXPECT_EQ(to["X-Kept"], "y");
        std::string head;
        appendEndToEndFields(from, head);
        EXPECT_EQ(head, "X-Kept: y\r\n") << name;
    }
}
