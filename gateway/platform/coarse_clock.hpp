// Clock reads for ages and deadlines that need no better than the kernel
// tick (a few ms): CLOCK_MONOTONIC_COARSE, steady_clock's clock as of the last
// tick, read by the vDSO without the time-stamp counter read that
// steady_clock::now() makes.
#pragma once

#include <chrono>
#include <ctime>

namespace dpgate::gateway {

// A proxied request reads the time about ten times (in a profile); the pool's
// idle ages and the work meter's 300 s window need no more than a tick.
inline std::chrono::steady_clock::time_point coarseNow() noexcept {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    return std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec)));
}

// coarseNow() plus one tick and 10 ms: a deadline's start (the deadline of
// every read and write would take a now(): about 1% of a small proxied
// request's CPU in a profile). A tick value can lag by more than a tick when
// the timekeeping update comes late (a loaded virtual machine: a few ms,
// seen in CI); the 10 ms keep a deadline from coming early then, and
// deadlines are only as exact as the 100 ms sweep period anyway.
inline std::chrono::steady_clock::time_point deadlineNow() noexcept {
    static const std::chrono::nanoseconds tick = [] {
        timespec resolution{};
        clock_getres(CLOCK_MONOTONIC_COARSE, &resolution);
        return std::chrono::seconds(resolution.tv_sec) + std::chrono::nanoseconds(resolution.tv_nsec);
    }();
    return coarseNow() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(tick) +
           std::chrono::milliseconds(10);
}

}  // namespace dpgate::gateway
