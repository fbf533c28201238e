// A counter never goes down and never wraps, whatever amount it is handed:
// some amounts (tokens) come from a backend's answer.
#include "gateway/metrics/metric_family.hpp"
#include "gateway/metrics/sharded_count.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

namespace dpgate::metrics {
namespace {

template <typename Amount>
concept Countable = requires(Counter& counter, Amount n) {
    counter.inc(n);
};

TEST(Counter, StopsAtTheLargestValueInsteadOfWrapping) {
    Counter counter;
    counter.inc(5);
    counter.inc(UINT64_MAX);  // wrapping would make it 4
    EXPECT_EQ(counter.value(), UINT64_MAX);
    counter.inc();
    counter.inc(UINT64_MAX);
    EXPECT_EQ(counter.value(), UINT64_MAX);
}

TEST(Counter, StopsAtTheLargestValueInAnOwnedCell) {
    Counter counter;
    std::thread([&] {
        const ShardOwner owner;
        ASSERT_TRUE(owner.owns());
        counter.inc(UINT64_MAX - 1);
        counter.inc(7);
    }).join();
    EXPECT_EQ(counter.value(), UINT64_MAX);
}

TEST(Counter, TheSumOfCellsStopsAtTheLargestValueToo) {
    // Each cell below the top, their sum past it: a read must not wrap
    // either, and no later read is below an earlier one.
    Counter counter;
    counter.inc(UINT64_MAX / 2 + 1);
    std::thread([&] {
        const ShardOwner owner;
        counter.inc(UINT64_MAX / 2 + 1);
    }).join();
    EXPECT_EQ(counter.value(), UINT64_MAX);
    std::thread([&] { counter.inc(3); }).join();
    EXPECT_EQ(counter.value(), UINT64_MAX);
}

TEST(Counter, RefusesANegativeAmount) {
    Counter counter;
    counter.inc(10);
    counter.inc(-1);
    counter.inc(int64_t{INT64_MIN});
    counter.inc(int8_t{-3});
    EXPECT_EQ(counter.value(), 10u);
    counter.inc(int64_t{4});
    counter.inc(uint32_t{1});
    EXPECT_EQ(counter.value(), 15u);
}

TEST(Counter, TakesOnlyWholeNumbers) {
    static_assert(Countable<uint64_t> && Countable<int> && Countable<uint32_t>);
    static_assert(!Countable<double> && !Countable<float> && !Countable<long double>);
}

TEST(Counter, ManyThreadsNearTheTopNeverWrap) {
    Counter counter;
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
        threads.emplace_back([&, t] {
            std::optional<ShardOwner> owner;  // owned cells and shared ones both
            if (t % 2) owner.emplace();
            for (int i = 0; i < 1000; ++i) counter.inc(UINT64_MAX / 1000);
        });
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(counter.value(), UINT64_MAX);
}

TEST(Histogram, RefusesNaNInfinityAndNegativeDurations) {
    Histogram histogram({1.0, 2.0});
    histogram.observe(1.5);
    histogram.observe(std::nan(""));
    histogram.observe(std::numeric_limits<double>::infinity());
    histogram.observe(-std::numeric_limits<double>::infinity());
    histogram.observe(-0.5);
    const Histogram::Snapshot s = histogram.snapshot();
    EXPECT_EQ(s.count, 1u);
    EXPECT_EQ(s.sum, 1.5);
    EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{0, 1, 1}));
    histogram.observe(0.0);
    EXPECT_EQ(histogram.snapshot().count, 2u);
}

}  // namespace
}  // namespace dpgate::metrics
