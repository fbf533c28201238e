#include "gateway/request_id.hpp"

#include <gtest/gtest.h>

using dpgate::gateway::requestIdFor;

TEST(RequestId, KeepsASaneClientId) {
    std::mt19937_64 random(1);
    EXPECT_EQ(requestIdFor("req-123_abc", random), "req-123_abc");
}

TEST(RequestId, ReplacesMissingOrUnsafeIds) {
    std::mt19937_64 random(1);
    for (std::string bad : {std::string(), std::string("has space"), std::string("quote\""), std::string(129, 'a'),
                            std::string("new\nline")}) {
        std::string id = requestIdFor(bad, random);
        EXPECT_EQ(id.size(), 32u) << bad;
        EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
    }
    EXPECT_NE(requestIdFor("", random), requestIdFor("", random));
}
