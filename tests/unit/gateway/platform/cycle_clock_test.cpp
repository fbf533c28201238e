#include "gateway/platform/cycle_clock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

namespace dpgate::gateway {
namespace {

using namespace std::chrono_literals;

TEST(CycleClock, RunsAtSteadyClocksRate) {
    CycleClock::scale();  // measured at the first call: not inside the interval
    double ratio = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const auto steady_start = std::chrono::steady_clock::now();
        const auto start = CycleClock::now();
        std::this_thread::sleep_for(50ms);
        const auto elapsed = CycleClock::now() - start;
        const auto steady_elapsed = std::chrono::steady_clock::now() - steady_start;
        ratio = std::chrono::duration<double>(elapsed) / std::chrono::duration<double>(steady_elapsed);
        // Within 0.5 %: a read's order against the other clock's is all that
        // differs (a preempted read can widen it: three tries).
        if (std::abs(ratio - 1.0) < 0.005) break;
    }
    EXPECT_NEAR(ratio, 1.0, 0.005) << "the clock ran at " << ratio << "x steady_clock's rate";
}

TEST(CycleClock, NeverGoesBackOnAThreadOrFromOneThreadToTheNext) {
    CycleClock::time_point last = CycleClock::now();
    for (int i = 0; i < 100'000; ++i) {
        const CycleClock::time_point now = CycleClock::now();
        ASSERT_GE(now, last);
        last = now;
    }
    CycleClock::time_point elsewhere;
    std::thread([&] { elsewhere = CycleClock::now(); }).join();
    EXPECT_GE(elsewhere, last);
    EXPECT_GE(CycleClock::now(), elsewhere);
}

TEST(CycleClock, ReadsTheCounterOnlyWhereTheKernelKeepsTimeWithIt) {
    EXPECT_EQ(CycleClock::measure("kvm-clock").mult, 0u);
    EXPECT_EQ(CycleClock::measure("hpet").mult, 0u);
    EXPECT_EQ(CycleClock::measure("").mult, 0u);
#if defined(__x86_64__)
    const bool kernel_uses_tsc = CycleClock::currentClocksource() == "tsc";
#else
    const bool kernel_uses_tsc = false;
#endif
    // DPGATE_PLAIN=cycle_clock: steady_clock, its plain twin, whatever the kernel keeps time with.
    EXPECT_EQ(CycleClock::scale().mult != 0, kernel_uses_tsc && dpgate::fastPathOn(dpgate::FastPath::cycle_clock))
        << "clocksource " << CycleClock::currentClocksource();
}

#if defined(__x86_64__)
TEST(CycleClock, MeasuresTheCountersRateTheSameEachTime) {
    const uint64_t first = CycleClock::measure("tsc").mult;
    const uint64_t second = CycleClock::measure("tsc").mult;
    ASSERT_NE(first, 0u);
    // A counter between 0.1 and 20 GHz, measured alike to 0.1 %.
    const double ns_per_tick = double(first) / double(uint64_t{1} << CycleClock::kShift);
    EXPECT_GT(ns_per_tick, 0.05);
    EXPECT_LT(ns_per_tick, 10.0);
    EXPECT_NEAR(double(second) / double(first), 1.0, 0.001);
}
#endif

}  // namespace
}  // namespace dpgate::gateway
