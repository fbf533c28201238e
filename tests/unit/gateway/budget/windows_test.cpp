#include "gateway/budget/windows.hpp"

#include <gtest/gtest.h>

namespace dpgate::gateway::budget {
namespace {

constexpr uint64_t kDay = 86'400'000;
// Noon of a UTC day, far from midnight.
constexpr uint64_t kNoon = 20'000 * kDay + kDay / 2;

Budget requestsPerMin(uint64_t n) { return {n, 0, 0, 0}; }
Budget tokensPerMin(uint64_t n) { return {0, 0, n, 0}; }

TEST(KeyWindows, RequestsPerMinuteBurstThenRefillWithRetryAfter) {
    KeyWindows w;
    const Budget b = requestsPerMin(60);  // one request per second
    const uint64_t t0 = 1'000'000;
    for (int i = 0; i < 60; ++i) ASSERT_EQ(w.reserve(b, b, 0, t0, kNoon).verdict, Verdict::allowed) << i;
    const Decision denied = w.reserve(b, b, 0, t0, kNoon);
    EXPECT_EQ(denied.verdict, Verdict::limited);
    EXPECT_EQ(denied.limit, Limit::requests_per_min);
    EXPECT_EQ(denied.retry_after_ms, 1000u);
    // 999 ms later one request is not yet back; at 1000 ms it is.
    EXPECT_EQ(w.reserve(b, b, 0, t0 + 999, kNoon).verdict, Verdict::limited);
    EXPECT_EQ(w.reserve(b, b, 0, t0 + 1000, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.reserve(b, b, 0, t0 + 1000, kNoon).verdict, Verdict::limited);
    // A whole minute refills to the burst size and no more.
    int allowed = 0;
    while (w.reserve(b, b, 0, t0 + 10 * 60'000, kNoon).verdict == Verdict::allowed) ++allowed;
    EXPECT_EQ(allowed, 60);
}

TEST(KeyWindows, RetryAfterIsTheTimeUntilTheNextRequest) {
    KeyWindows w;
    const Budget b = requestsPerMin(2);  // one request per 30 s
    EXPECT_EQ(w.reserve(b, b, 0, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.reserve(b, b, 0, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.reserve(b, b, 0, 0, kNoon).retry_after_ms, 30'000u);
    EXPECT_EQ(w.reserve(b, b, 0, 10'000, kNoon).retry_after_ms, 20'000u);
    EXPECT_EQ(w.reserve(b, b, 0, 5'000, kNoon).retry_after_ms, 20'000u);  // clock stepped back: no refill, no loss
    EXPECT_EQ(w.reserve(b, b, 0, 30'000, kNoon).verdict, Verdict::allowed);
}

TEST(KeyWindows, TokensAreReservedExactlyAndTheUnusedPartComesBack) {
    KeyWindows w;
    const Budget b = tokensPerMin(100'000);
    Decision d = w.reserve(b, b, 60'000, 0, kNoon);
    ASSERT_EQ(d.verdict, Verdict::allowed);
    EXPECT_EQ(d.headroom.limit_tokens, 100'000u);
    EXPECT_EQ(d.headroom.remaining_tokens, 40'000u);
    EXPECT_EQ(d.headroom.reset_tokens_ms, 36'000u);  // 60,000 tokens at 100,000 a minute
    // 40,001 does not fit now; it does once one token's worth of time passed.
    d = w.reserve(b, b, 40'001, 0, kNoon);
    EXPECT_EQ(d.verdict, Verdict::limited);
    EXPECT_EQ(d.limit, Limit::tokens_per_min);
    EXPECT_EQ(d.retry_after_ms, 1u);
    // The answer used 10,000 of the 60,000: 50,000 come back.
    w.settle(b, 50'000, d.day, 0);
    d = w.reserve(b, b, 90'000, 0, kNoon);
    EXPECT_EQ(d.verdict, Verdict::allowed);
    EXPECT_EQ(d.headroom.remaining_tokens, 0u);
}

TEST(KeyWindows, MoreThanAWholeWindowNeverFits) {
    KeyWindows w;
    const Budget b{0, 0, 1000, 5000};
    EXPECT_EQ(w.reserve(b, b, 1001, 0, kNoon).verdict, Verdict::never_fits);
    EXPECT_EQ(w.reserve(b, b, 1001, 0, kNoon).limit, Limit::tokens_per_min);
    const Budget daily{0, 0, 0, 5000};
    EXPECT_EQ(w.reserve(daily, daily, 5001, 0, kNoon).verdict, Verdict::never_fits);
    EXPECT_EQ(w.reserve(daily, daily, 5001, 0, kNoon).limit, Limit::tokens_per_day);
    // Nothing was charged by the refusals.
    EXPECT_EQ(w.today(kNoon).tokens, 0u);
    EXPECT_EQ(w.reserve(daily, daily, 5000, 0, kNoon).verdict, Verdict::allowed);
}

TEST(KeyWindows, ADayEndsAtUtcMidnight) {
    KeyWindows w;
    const Budget b{0, 2, 0, 0};
    EXPECT_EQ(w.reserve(b, b, 10, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.reserve(b, b, 10, 0, kNoon).verdict, Verdict::allowed);
    const Decision d = w.reserve(b, b, 10, 0, kNoon);
    EXPECT_EQ(d.verdict, Verdict::limited);
    EXPECT_EQ(d.limit, Limit::requests_per_day);
    EXPECT_EQ(d.retry_after_ms, kDay / 2);
    EXPECT_EQ(d.headroom.limit_requests, 2u);
    EXPECT_EQ(d.headroom.remaining_requests, 0u);
    EXPECT_EQ(w.today(kNoon).requests, 2u);
    EXPECT_EQ(w.today(kNoon).tokens, 20u);
    const uint64_t next_day = kNoon + kDay / 2;
    EXPECT_EQ(w.reserve(b, b, 10, 1, next_day).verdict, Verdict::allowed);
    EXPECT_EQ(w.today(next_day).requests, 1u);
}

TEST(KeyWindows, ARefundForYesterdayDoesNotTouchToday) {
    KeyWindows w;
    const Budget b{0, 0, 0, 100};
    const Decision d = w.reserve(b, b, 80, 0, kNoon);
    ASSERT_EQ(d.verdict, Verdict::allowed);
    const uint64_t tomorrow = kNoon + kDay;
    EXPECT_EQ(w.reserve(b, b, 90, 0, tomorrow).verdict, Verdict::allowed);
    w.settle(b, 80, d.day, 0);  // yesterday's request ended now
    EXPECT_EQ(w.today(tomorrow).tokens, 90u);
}

TEST(KeyWindows, UsingMoreThanReservedIsChargedAtSettle) {
    KeyWindows w;
    const Budget b{0, 0, 0, 1000};
    const Decision d = w.reserve(b, b, 100, 0, kNoon);
    w.settle(b, -50, d.day, 0);
    EXPECT_EQ(w.today(kNoon).tokens, 150u);
}

TEST(KeyWindows, AShareIsEnforcedAndARequestLargerThanItGoesWhenItsBucketIsFull) {
    const Budget whole = tokensPerMin(90'000);
    const Budget share = whole.share(3);
    EXPECT_EQ(share.tokens_per_min, 30'000u);
    KeyWindows w;
    // 50,000 is more than the share but within the key's budget: it goes on
    // a full bucket and leaves it in debt.
    EXPECT_EQ(w.reserve(share, whole, 50'000, 0, kNoon).verdict, Verdict::allowed);
    Decision d = w.reserve(share, whole, 1, 0, kNoon);
    EXPECT_EQ(d.verdict, Verdict::limited);
    // Debt of 20,000 plus one token at 30,000 a minute.
    EXPECT_EQ(d.retry_after_ms, (20'001ull * 60'000 + 29'999) / 30'000);
    EXPECT_EQ(w.reserve(share, whole, 90'001, 0, kNoon).verdict, Verdict::never_fits);
}

TEST(KeyWindows, ShareRoundsUpAndKeepsUnlimitedUnlimited) {
    const Budget b{10, 0, 7, 1};
    const Budget s = b.share(4);
    EXPECT_EQ(s.requests_per_min, 3u);
    EXPECT_EQ(s.requests_per_day, 0u);
    EXPECT_EQ(s.tokens_per_min, 2u);
    EXPECT_EQ(s.tokens_per_day, 1u);
    EXPECT_EQ(b.share(1), b);
    EXPECT_EQ(b.share(0), b);
}

TEST(KeyWindows, TheHeadIsRefusedOnlyForRequestBudgetsAndChargesNothing) {
    KeyWindows w;
    const Budget b{1, 0, 1000, 0};
    EXPECT_EQ(w.requestsBlockedFor(b, 0, kNoon), 0u);
    EXPECT_EQ(w.requestsBlockedFor(b, 0, kNoon), 0u);  // a peek charges nothing
    EXPECT_EQ(w.reserve(b, b, 10, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.requestsBlockedFor(b, 0, kNoon), 60'000u);
    EXPECT_EQ(w.requestsBlockedFor(b, 30'000, kNoon), 30'000u);
    const Budget tokens_only = tokensPerMin(5);
    KeyWindows t;
    EXPECT_EQ(t.reserve(tokens_only, tokens_only, 5, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(t.requestsBlockedFor(tokens_only, 0, kNoon), 0u);  // a smaller request may still fit later
}

TEST(KeyWindows, AnUnbudgetedKeyIsOnlyCounted) {
    KeyWindows w;
    const Budget none;
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(w.reserve(none, none, 1'000'000, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.today(kNoon).requests, 1000u);
    EXPECT_EQ(w.today(kNoon).tokens, 1'000'000'000u);
    const Decision d = w.reserve(none, none, 1, 0, kNoon);
    EXPECT_EQ(d.headroom.limit_tokens, 0u);
    EXPECT_EQ(d.headroom.limit_requests, 0u);
}

TEST(KeyWindows, ARestoredDayCountsOnlyOnThatDay) {
    KeyWindows w;
    w.restoreDay(uint32_t(kNoon / kDay), 7, 700, kNoon);
    EXPECT_EQ(w.today(kNoon).tokens, 700u);
    KeyWindows old;
    old.restoreDay(uint32_t(kNoon / kDay) - 1, 7, 700, kNoon);
    EXPECT_EQ(old.today(kNoon).tokens, 0u);
    const Budget b{0, 8, 0, 0};
    EXPECT_EQ(w.reserve(b, b, 1, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.reserve(b, b, 1, 0, kNoon).verdict, Verdict::limited);
}

TEST(KeyWindows, ABudgetThatGrowsAddsWhatItGrewBy) {
    KeyWindows w;
    const Budget none;
    EXPECT_EQ(w.reserve(none, none, 10, 0, kNoon).verdict, Verdict::allowed);
    const Budget some{2, 0, 1000, 0};  // was unlimited: starts full
    EXPECT_EQ(w.reserve(some, some, 1000, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.reserve(some, some, 0, 0, kNoon).verdict, Verdict::allowed);
    EXPECT_EQ(w.reserve(some, some, 0, 0, kNoon).limit, Limit::requests_per_min);
    const Budget more{2, 0, 3000, 0};  // 2,000 more tokens at once
    const Decision d = w.reserve(more, more, 0, 10'000, kNoon);
    EXPECT_EQ(d.headroom.remaining_tokens, 2000u + 500u);  // and 10 s of refill at 3,000 a minute
}

TEST(KeyWindows, AReloadThatLowersTheBudgetCapsWhatIsHeld) {
    KeyWindows w;
    const Budget big = tokensPerMin(1'000'000);
    EXPECT_EQ(w.reserve(big, big, 1, 0, kNoon).verdict, Verdict::allowed);
    const Budget small = tokensPerMin(1000);
    const Decision d = w.reserve(small, small, 1000, 0, kNoon);
    EXPECT_EQ(d.verdict, Verdict::allowed);
    EXPECT_EQ(d.headroom.remaining_tokens, 0u);
}

}  // namespace
}  // namespace dpgate::gateway::budget
