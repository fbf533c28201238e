#include "gateway/auth/key_limiter.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace dpgate::auth {
namespace {

conf::AuthConfig keysWith(uint32_t max_concurrent, uint32_t requests_per_min) {
    conf::AuthConfig auth;
    auth.keys.push_back(conf::AuthKey{"k", std::string(64, 'a'), false, max_concurrent, requests_per_min});
    auth.keys.push_back(conf::AuthKey{"free", std::string(64, 'b'), false, 0, 0});
    return auth;
}

TEST(KeyLimiter, UnlimitedAndUnknownKeysAreAlwaysAllowed) {
    KeyLimiter limiter(keysWith(1, 1));
    for (int i = 0; i < 1000; ++i) {
        EXPECT_TRUE(limiter.tryAcquire("free").allowed);
        EXPECT_TRUE(limiter.tryAcquire("nobody").allowed);
    }
    EXPECT_EQ(limiter.inFlight("free"), 1000u);  // counted for metrics, never refused
    EXPECT_EQ(limiter.inFlight("nobody"), 0u);
    limiter.release("nobody");  // no-op, no crash
}

TEST(KeyLimiter, MaxConcurrentRefusesUntilARelease) {
    KeyLimiter limiter(keysWith(2, 0));
    EXPECT_TRUE(limiter.tryAcquire("k").allowed);
    EXPECT_TRUE(limiter.tryAcquire("k").allowed);
    const RateDecision third = limiter.tryAcquire("k");
    EXPECT_FALSE(third.allowed);
    EXPECT_EQ(third.reason, "max_concurrent");
    EXPECT_EQ(third.retry_after_seconds, 1u);
    EXPECT_EQ(limiter.inFlight("k"), 2u);  // a refusal holds nothing
    limiter.release("k");
    EXPECT_TRUE(limiter.tryAcquire("k").allowed);
    EXPECT_FALSE(limiter.tryAcquire("k").allowed);  // time does not free slots
}

TEST(KeyLimiter, ReleaseNeverGoesBelowZero) {
    KeyLimiter limiter(keysWith(1, 0));
    limiter.release("k");
    limiter.release("k");
    EXPECT_EQ(limiter.inFlight("k"), 0u);
    EXPECT_TRUE(limiter.tryAcquire("k").allowed);
    EXPECT_FALSE(limiter.tryAcquire("k").allowed);
    limiter.release("free");  // an unlimited key's count reads zero too
    EXPECT_EQ(limiter.inFlight("free"), 0u);
}

TEST(KeyLimiter, ConcurrentAcquireAndReleaseNeverExceedTheLimit) {
    constexpr uint32_t limit = 3;
    KeyLimiter limiter(keysWith(limit, 0));
    std::atomic<int> holding{0};
    std::atomic<int> worst{0};
    std::atomic<int> granted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 20000; ++i) {
                if (!limiter.tryAcquire("k").allowed) continue;
                const int now = ++holding;
                int seen = worst.load();
                while (now > seen && !worst.compare_exchange_weak(seen, now)) {
                }
                ++granted;
                --holding;
                limiter.release("k");
            }
        });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_LE(worst.load(), static_cast<int>(limit));
    EXPECT_GT(granted.load(), 0);
    EXPECT_EQ(limiter.inFlight("k"), 0u);
}

TEST(KeyLimiter, AnUnlimitedKeyCountsRequestsOnEveryThread) {
    // Its count is sharded by thread; taken on one thread and given back on
    // another, it still adds up.
    KeyLimiter limiter(keysWith(1, 1));
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 5000; ++i) ASSERT_TRUE(limiter.tryAcquire("free").allowed);
        });
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(limiter.inFlight("free"), 30000u);
    std::thread([&] {
        for (int i = 0; i < 29999; ++i) limiter.release("free");
    }).join();
    EXPECT_EQ(limiter.inFlight("free"), 1u);
    EXPECT_EQ(limiter.inFlight("k"), 0u);  // the limited key's count is its own
}

}  // namespace
}  // namespace dpgate::auth
