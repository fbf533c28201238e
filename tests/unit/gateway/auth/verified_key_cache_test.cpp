#include "gateway/auth/verified_key_cache.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dpgate::auth {
namespace {

TEST(VerifiedKeyCache, FindsOnlyTheExactKeyItRemembered) {
    VerifiedKeyCache cache(4);
    cache.remember("sk-alice", 3);
    EXPECT_EQ(cache.find("sk-alice"), 3u);
    EXPECT_EQ(cache.find("sk-alicE"), std::nullopt);
    EXPECT_EQ(cache.find("sk-alic"), std::nullopt);    // a prefix
    EXPECT_EQ(cache.find("sk-alice "), std::nullopt);  // longer
    // Zero padding is not part of the key: the key plus NULs is another key.
    EXPECT_EQ(cache.find(std::string_view("sk-alice\0", 9)), std::nullopt);
    EXPECT_EQ(cache.find(""), std::nullopt);
}

TEST(VerifiedKeyCache, HoldsAtMostItsCapacityAndReplacesTheOldest) {
    VerifiedKeyCache cache(2);
    cache.remember("k1", 1);
    cache.remember("k2", 2);
    cache.remember("k1", 1);  // already there: not a second slot
    EXPECT_EQ(cache.size(), 2u);
    cache.remember("k3", 3);
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_EQ(cache.find("k1"), std::nullopt);
    EXPECT_EQ(cache.find("k2"), 2u);
    EXPECT_EQ(cache.find("k3"), 3u);
}

TEST(VerifiedKeyCache, NeverHoldsKeysWiderThanItsSlots) {
    VerifiedKeyCache cache(2);
    const std::string widest(VerifiedKeyCache::kMaxKeyBytes, 'k');
    const std::string too_long(VerifiedKeyCache::kMaxKeyBytes + 1, 'k');
    cache.remember(too_long, 1);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(cache.find(too_long), std::nullopt);
    cache.remember(widest, 2);
    EXPECT_EQ(cache.find(widest), 2u);
    EXPECT_EQ(cache.find(too_long), std::nullopt);  // the widest key is its prefix
}

TEST(VerifiedKeyCache, ResetForgetsEverythingAndTakesTheNewGeneration) {
    VerifiedKeyCache cache(2);
    cache.remember("k1", 1);
    cache.reset(7);
    EXPECT_EQ(cache.generation(), 7u);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(cache.find("k1"), std::nullopt);
}

}  // namespace
}  // namespace dpgate::auth
