#include "routing/work_meter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

using namespace dpgate::routing;

TEST(WorkMeter, DecaysOverItsWindow) {
    WorkMeter meter(4, 300);
    meter.add(1, 1'000, 10);
    EXPECT_DOUBLE_EQ(meter.value(1, 10), 1'000);
    EXPECT_NEAR(meter.value(1, 310), 1'000 * std::exp(-1.0), 1e-9);
    EXPECT_NEAR(meter.value(1, 610), 1'000 * std::exp(-2.0), 1e-9);
    EXPECT_EQ(meter.value(0, 610), 0);
    // Work added later counts in full from then on.
    meter.add(1, 500, 610);
    EXPECT_NEAR(meter.value(1, 610), 500 + 1'000 * std::exp(-2.0), 1e-9);
}

TEST(WorkMeter, CorrectionsNeverDriveASlotBelowZero) {
    WorkMeter meter(2, 60);
    meter.add(0, 4'000, 0);     // charged the expected uncached tokens
    meter.add(0, -3'000, 0.5);  // the answer said most was cached
    EXPECT_NEAR(meter.value(0, 0.5), 4'000 * std::exp(-0.5 / 60) - 3'000, 1e-9);
    meter.add(1, -100, 1);
    EXPECT_EQ(meter.value(1, 1), 0);
}

TEST(WorkMeter, ClockSteppingBackDoesNotGrowTheValues) {
    WorkMeter meter(1, 10);
    meter.add(0, 100, 50);
    EXPECT_DOUBLE_EQ(meter.value(0, 40), 100);
    EXPECT_LT(meter.value(0, 60), 100);
}

TEST(WorkMeter, ZeroWindowAccumulatesAndOutOfRangeIsIgnored) {
    WorkMeter meter(2, 0);
    meter.add(0, 10, 1);
    meter.add(0, 10, 1e6);
    meter.add(7, 10, 1);
    EXPECT_DOUBLE_EQ(meter.value(0, 2e6), 20);
    std::vector<size_t> indexes{1, 0, 9};
    std::vector<double> out(3, -1);
    meter.values(indexes, 2e6, out);
    EXPECT_EQ(out, (std::vector<double>{0, 20, 0}));
}

TEST(WorkMeter, ConcurrentAddsAreAllCounted) {
    WorkMeter meter(8, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&meter, t] {
            for (int i = 0; i < 10'000; ++i) meter.add(size_t(i % 8), 1, double(t));
        });
    for (auto& th : threads) th.join();
    double total = 0;
    for (size_t s = 0; s < 8; ++s) total += meter.value(s, 10);
    EXPECT_DOUBLE_EQ(total, 40'000);
}

TEST(WorkMeter, ShardsAddUpAndDecayAsOneMeter) {
    WorkMeter one(3, 120);
    WorkMeter sharded(3, 120, 4);
    const struct {
        size_t slot;
        double tokens, at;
        size_t shard;
    } adds[] = {{0, 1'000, 1, 0}, {0, 500, 2, 1}, {1, 300, 2, 3}, {0, -200, 5, 0}, {2, 50, 60, 6}, {1, 700, 90, 2}};
    for (const auto& a : adds) {
        one.add(a.slot, a.tokens, a.at);
        sharded.add(a.slot, a.tokens, a.at, a.shard);  // shard 6 is shard 2
    }
    std::vector<size_t> indexes{0, 1, 2};
    std::vector<double> a(3), b(3);
    for (double t : {90.0, 200.0, 1'000.0}) {
        one.values(indexes, t, a);
        sharded.values(indexes, t, b);
        for (size_t i = 0; i < 3; ++i) {
            EXPECT_NEAR(b[i], a[i], 1e-9 * std::max(1.0, a[i])) << "slot " << i << " at " << t;
            EXPECT_NEAR(sharded.value(i, t), a[i], 1e-9 * std::max(1.0, a[i]));
        }
    }
}

TEST(WorkMeter, ACorrectionStaysInItsChargesShard) {
    // A lease charges its expected work to its shard and corrects it there:
    // another shard's floor at zero does not swallow the correction.
    WorkMeter meter(1, 0, 2);
    meter.add(0, 1'000, 0, 1);
    meter.add(0, 400, 0, 0);
    meter.add(0, -900, 1, 1);  // the answer said 900 of shard 1's charge were cached
    EXPECT_DOUBLE_EQ(meter.value(0, 2), 500);
    meter.add(0, -1'000, 1, 0);  // more than shard 0 holds: it stops at zero
    EXPECT_DOUBLE_EQ(meter.value(0, 2), 100);
}

TEST(WorkMeter, ConcurrentShardedAddsAreAllCounted) {
    WorkMeter meter(8, 0, 8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
        threads.emplace_back([&meter, t] {
            for (int i = 0; i < 10'000; ++i) meter.add(size_t(i % 8), 1, double(i), size_t(t));
        });
    std::thread reader([&meter] {
        for (int i = 0; i < 1'000; ++i) EXPECT_GE(meter.value(3, 1e9), 0);
    });
    for (auto& th : threads) th.join();
    reader.join();
    double total = 0;
    for (size_t s = 0; s < 8; ++s) total += meter.value(s, 1e9);
    EXPECT_DOUBLE_EQ(total, 60'000);
}
