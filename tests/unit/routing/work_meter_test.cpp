#include "routing/work_meter.hpp"

#include <gtest/gtest.h>

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
