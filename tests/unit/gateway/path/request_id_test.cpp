#include "gateway/path/request_id.hpp"

#include <gtest/gtest.h>

#include <unordered_set>

using dpgate::gateway::assignRequestId;
using dpgate::gateway::requestIdFor;
using dpgate::gateway::RequestIdSource;

TEST(RequestId, KeepsASaneClientId) {
    RequestIdSource ids(1);
    EXPECT_EQ(requestIdFor("req-123_abc", ids), "req-123_abc");
}

TEST(RequestId, ReplacesMissingOrUnsafeIds) {
    RequestIdSource ids(1);
    for (std::string bad : {std::string(), std::string("has space"), std::string("quote\""), std::string(129, 'a'),
                            std::string("new\nline")}) {
        std::string id = requestIdFor(bad, ids);
        EXPECT_EQ(id.size(), 32u) << bad;
        EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
    }
    EXPECT_NE(requestIdFor("", ids), requestIdFor("", ids));
}

TEST(RequestId, FreshIdsDoNotRepeatAndDifferAcrossSeeds) {
    RequestIdSource first(42);
    RequestIdSource second(43);
    std::unordered_set<std::string> seen;
    for (int i = 0; i < 100000; ++i) {
        EXPECT_TRUE(seen.insert(requestIdFor("", first)).second) << i;
        EXPECT_TRUE(seen.insert(requestIdFor("", second)).second) << i;
    }
    // Every hex digit position varies (no constant half of the id).
    RequestIdSource ids(7);
    const std::string a = requestIdFor("", ids);
    std::string differs(32, '.');
    for (int i = 0; i < 64; ++i) {
        const std::string b = requestIdFor("", ids);
        for (size_t p = 0; p < 32; ++p)
            if (a[p] != b[p]) differs[p] = 'x';
    }
    EXPECT_EQ(differs, std::string(32, 'x'));
}

// Written over a string that held another request's id, in its buffer: the
// same ids requestIdFor gives.
TEST(RequestId, AssignedOverAnOldIdInItsBuffer) {
    RequestIdSource a(9), b(9);
    std::string id(100, 'z');
    const char* buffer = id.data();
    for (std::string_view client : {std::string_view(), std::string_view("req-7"), std::string_view("bad id")}) {
        assignRequestId(id, client, a);
        EXPECT_EQ(id, requestIdFor(client, b)) << client;
        EXPECT_EQ(id.data(), buffer);
    }
}

// A fresh id is the source's next two numbers in hex, each low nibble first.
TEST(RequestId, FreshIdIsTheNextTwoNumbersInHexLowNibbleFirst) {
    RequestIdSource ids(11), same(11);
    for (int round = 0; round < 1000; ++round) {
        std::string expected;
        for (int half = 0; half < 2; ++half) {
            const std::uint64_t bits = same.next();
            for (int i = 0; i < 16; ++i) expected += "0123456789abcdef"[(bits >> (4 * i)) & 0xf];
        }
        ASSERT_EQ(requestIdFor("", ids), expected) << round;
    }
}
