// Recent prefill work per slot: the prompt tokens each (backend, rank) had
// to compute because they were not in its cache, decayed exponentially over
// a window (default 300 s, about a conversation's life). The in-flight load
// says how long the queue is now; this says where the conversations that
// will keep coming back live. The slot chooser sends a new conversation away
// from a slot that has done more than its share (routing.work_balance_factor).
// Indexed like the registry's load counters (one per configured rank), so
// a table rebuild on failover does not lose it. Thread-safe, and sharded:
// every request adds to it, so each writer names a shard (the gateway: its
// thread's) with a lock, values and clock of its own, and a read adds the
// shards up. Decay is linear, so the sum decays as one meter would; a
// correction goes to the shard its charge went to, so the floor at zero
// holds as it did for one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "routing/spin_lock.hpp"

namespace dpgate::routing {

class WorkMeter {
public:
    WorkMeter(size_t slots, double window_s, size_t shards = 1);

    // Adds `tokens` of work (negative: a correction once the backend reported
    // what it really computed) at time `now_s` (any monotonic clock, seconds),
    // in `shard` (taken modulo the shard count). A slot's work in one shard
    // never goes below zero.
    void add(size_t slot, double tokens, double now_s, size_t shard = 0);

    // out[i] = the decayed work of slot indexes[i] at `now_s`.
    void values(std::span<const size_t> indexes, double now_s, std::span<double> out) const;
    double value(size_t slot, double now_s) const;

    void setWindow(double window_s);

private:
    struct alignas(64) Shard {
        SpinLock lock;
        std::vector<double> work;
        double at_s = 0;                // the time `work` is decayed to
        std::atomic<bool> used{false};  // a read skips shards nothing was added to
    };
    void decayLocked(Shard& shard, double now_s) const;
    // Calls f(shard) for each shard something was added to, under its lock.
    template <typename F>
    void forEachUsed(double now_s, F&& f) const;

    size_t slots_;
    size_t shard_count_;
    std::unique_ptr<Shard[]> shards_;  // reads decay them too (under the shard's lock)
    std::atomic<double> window_s_;
};

// The time the gateway passes to a WorkMeter: steady-clock seconds.
inline double meterSeconds(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace dpgate::routing
