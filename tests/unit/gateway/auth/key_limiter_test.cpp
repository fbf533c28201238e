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
        EXPECT_TRUE(limiter.tryAcquire("free", 0).allowed);
        EXPECT_TRUE(limiter.tryAcquire("nobody", 0).allowed);
    }
    EXPECT_EQ(limiter.inFlight("free"), 1000u);  // counted for metrics, never refused
    EXPECT_EQ(limiter.inFlight("nobody"), 0u);
    limiter.release("nobody");  // no-op, no crash
}

TEST(KeyLimiter, MaxConcurrentRefusesUntilARelease) {
    KeyLimiter limiter(keysWith(2, 0));
    EXPECT_TRUE(limiter.tryAcquire("k", 0).allowed);
    EXPECT_TRUE(limiter.tryAcquire("k", 0).allowed);
    const RateDecision third = limiter.tryAcquire("k", 0);
    EXPECT_FALSE(third.allowed);
    EXPECT_EQ(third.reason, "max_concurrent");
    EXPECT_EQ(third.retry_after_seconds, 1u);
    EXPECT_EQ(limiter.inFlight("k"), 2u);  // a refusal holds nothing
    limiter.release("k");
    EXPECT_TRUE(limiter.tryAcquire("k", 0).allowed);
    EXPECT_FALSE(limiter.tryAcquire("k", 999999).allowed);  // time does not free slots
}

TEST(KeyLimiter, ReleaseNeverGoesBelowZero) {
    KeyLimiter limiter(keysWith(1, 0));
    limiter.release("k");
    limiter.release("k");
    EXPECT_EQ(limiter.inFlight("k"), 0u);
    EXPECT_TRUE(limiter.tryAcquire("k", 0).allowed);
    EXPECT_FALSE(limiter.tryAcquire("k", 0).allowed);
    limiter.release("free");  // an unlimited key's count reads zero too
    EXPECT_EQ(limiter.inFlight("free"), 0u);
}

TEST(KeyLimiter, RequestsPerMinuteBurstThenRefillWithRetryAfter) {
    KeyLimiter limiter(keysWith(0, 60));  // one request per second
    const uint64_t t0 = 1'000'000;
    for (int i = 0; i < 60; ++i) {
        ASSERT_TRUE(limiter.tryAcquire("k", t0).allowed) << i;
        limiter.release("k");
    }
    RateDecision denied = limiter.tryAcquire("k", t0);
    EXPECT_FALSE(denied.allowed);
    EXPECT_EQ(denied.reason, "requests_per_min");
    EXPECT_EQ(denied.retry_after_seconds, 1u);

    // 999 ms later one request is not yet back; at 1000 ms it is.
    EXPECT_FALSE(limiter.tryAcquire("k", t0 + 999).allowed);
    EXPECT_TRUE(limiter.tryAcquire("k", t0 + 1000).allowed);
    EXPECT_FALSE(limiter.tryAcquire("k", t0 + 1000).allowed);

    // A whole minute refills to the burst size and no more.
    int allowed = 0;
    while (limiter.tryAcquire("k", t0 + 10 * 60'000).allowed) ++allowed;
    EXPECT_EQ(allowed, 60);
}

TEST(KeyLimiter, RetryAfterIsTheTimeUntilTheNextRequestRoundedUp) {
    KeyLimiter limiter(keysWith(0, 2));  // one request per 30 s
    EXPECT_TRUE(limiter.tryAcquire("k", 0).allowed);
    EXPECT_TRUE(limiter.tryAcquire("k", 0).allowed);
    EXPECT_EQ(limiter.tryAcquire("k", 0).retry_after_seconds, 30u);
    EXPECT_EQ(limiter.tryAcquire("k", 10'000).retry_after_seconds, 20u);
    EXPECT_EQ(limiter.tryAcquire("k", 29'001).retry_after_seconds, 1u);  // 999 ms -> 1 s
    EXPECT_EQ(limiter.tryAcquire("k", 5'000).retry_after_seconds, 1u);   // clock stepped back: no refill, no loss
    EXPECT_TRUE(limiter.tryAcquire("k", 30'000).allowed);
}

TEST(KeyLimiter, ConcurrencyIsCheckedBeforeTheMinuteIsCharged) {
    KeyLimiter limiter(keysWith(1, 2));
    EXPECT_TRUE(limiter.tryAcquire("k", 0).allowed);
    // Refused for concurrency: must not use up the second request of the minute.
    for (int i = 0; i < 5; ++i) EXPECT_EQ(limiter.tryAcquire("k", 0).reason, "max_concurrent");
    limiter.release("k");
    EXPECT_TRUE(limiter.tryAcquire("k", 0).allowed);
    limiter.release("k");
    EXPECT_EQ(limiter.tryAcquire("k", 0).reason, "requests_per_min");
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
                if (!limiter.tryAcquire("k", 0).allowed) continue;
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
            for (int i = 0; i < 5000; ++i) ASSERT_TRUE(limiter.tryAcquire("free", 0).allowed);
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
