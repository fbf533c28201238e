// The clock of a request's timeline: when it began, its admission, its
// first byte and its end, five reads per proxied request for the latency
// metrics and the access line. steady_clock::now() costs 27 ns on these
// machines: the vDSO reads the time-stamp counter ordered (it waits for the
// instructions before it) and converts it. This clock reads the counter
// unordered (16 ns) and scales it with one multiply (docs/BENCHMARKS.md has
// the figures).
//
// It is steady, with an epoch of its own: its time points are a type of
// their own, not steady_clock's. It reads the counter only where the kernel
// keeps time with it (the kernel checked that it runs at a constant rate and
// in step on every core before choosing it); elsewhere, or off x86-64, it
// reads steady_clock, its plain twin: so it does when DPGATE_PLAIN turns
// the fast path cycle_clock off (common/fast_paths.hpp). cycle_clock_test
// holds the two to each other.
#pragma once

#include "common/fast_paths.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace dpgate::gateway {

struct CycleClock {
    using duration = std::chrono::nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<CycleClock>;
    static constexpr bool is_steady = true;

    // Nanoseconds per 2^kShift counter ticks; 0: read steady_clock instead.
    static constexpr unsigned kShift = 32;
    struct Scale {
        uint64_t mult = 0;
    };
    // The product of a counter value and a scale (a GCC and Clang extension).
    __extension__ typedef unsigned __int128 Wide;

    static time_point now() noexcept {
#if defined(__x86_64__)
        const uint64_t mult = scale().mult;
        if (mult != 0) return time_point(duration(rep((static_cast<Wide>(__rdtsc()) * mult) >> kShift)));
#endif
        return time_point(std::chrono::duration_cast<duration>(std::chrono::steady_clock::now().time_since_epoch()));
    }

    // Measured once, at the first call (10 ms against CLOCK_MONOTONIC); a
    // worker calls it before it serves.
    static const Scale& scale() noexcept {
        static const Scale measured = fastPathOn(FastPath::cycle_clock) ? measure(currentClocksource()) : Scale{};
        return measured;
    }

    // The scale for a kernel whose clocksource is `clocksource`: measured
    // for "tsc" on x86-64, else 0.
    static Scale measure(std::string_view clocksource) noexcept;
    // /sys/devices/system/clocksource/clocksource0/current_clocksource, or
    // "" where it cannot be read.
    static std::string currentClocksource();
};

}  // namespace dpgate::gateway
