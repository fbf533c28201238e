#include "gateway/platform/cycle_clock.hpp"

#include <ctime>
#include <fstream>
#include <string>

namespace dpgate::gateway {

std::string CycleClock::currentClocksource() {
    std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string name;
    in >> name;
    return name;
}

CycleClock::Scale CycleClock::measure(std::string_view clocksource) noexcept {
#if defined(__x86_64__)
    if (clocksource != "tsc") return {};
    struct Sample {
        int64_t ns = 0;
        uint64_t ticks = 0;
    };
    // The counter between two clock reads, the clock taken at their middle:
    // of three tries, the one whose reads were closest (not interrupted).
    auto sample = [] {
        Sample best;
        int64_t best_gap = INT64_MAX;
        for (int i = 0; i < 3; ++i) {
            timespec before{}, after{};
            clock_gettime(CLOCK_MONOTONIC, &before);
            const uint64_t ticks = __rdtsc();
            clock_gettime(CLOCK_MONOTONIC, &after);
            const int64_t a = int64_t(before.tv_sec) * 1'000'000'000 + before.tv_nsec;
            const int64_t b = int64_t(after.tv_sec) * 1'000'000'000 + after.tv_nsec;
            if (b - a < best_gap) {
                best_gap = b - a;
                best = {a + (b - a) / 2, ticks};
            }
        }
        return best;
    };
    const Sample first = sample();
    timespec pause{0, 10'000'000};
    while (nanosleep(&pause, &pause) != 0) {
    }
    const Sample second = sample();
    if (second.ticks <= first.ticks || second.ns <= first.ns) return {};
    const auto mult = (static_cast<Wide>(second.ns - first.ns) << kShift) / (second.ticks - first.ticks);
    return {uint64_t(mult)};
#else
    (void)clocksource;
    return {};
#endif
}

}  // namespace dpgate::gateway
