// Recent prefill work per slot: the prompt tokens each (backend, rank) had
// to compute because they were not in its cache, decayed exponentially over
// a window (default 300 s, about a conversation's life). The in-flight load
// says how long the queue is now; this says where the conversations that
// will keep coming back live. The slot chooser sends a new conversation away
// from a slot that has done more than its share (routing.work_balance_factor).
// Indexed like the registry's load counters (one per configured rank), so
// a table rebuild on failover does not lose it. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <span>
#include <vector>

namespace dpgate::routing {

class WorkMeter {
public:
    WorkMeter(size_t slots, double window_s);

    // Adds `tokens` of work (negative: a correction once the backend reported
    // what it really computed) at time `now_s` (any monotonic clock, seconds).
    void add(size_t slot, double tokens, double now_s);

    // out[i] = the decayed work of slot indexes[i] at `now_s`.
    void values(std::span<const size_t> indexes, double now_s, std::span<double> out) const;
    double value(size_t slot, double now_s) const;

    void setWindow(double window_s);

private:
    void decayLocked(double now_s) const;

    mutable std::mutex mutex_;
    mutable std::vector<double> work_;
    mutable double at_s_ = 0;  // the time work_ is decayed to
    double window_s_;
};

// The time the gateway passes to a WorkMeter: steady-clock seconds.
inline double meterSeconds(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace dpgate::routing
