#include "routing/work_meter.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace dpgate::routing {

WorkMeter::WorkMeter(size_t slots, double window_s, size_t shards)
    : slots_(slots),
      shard_count_(std::max<size_t>(1, shards)),
      shards_(std::make_unique<Shard[]>(shard_count_)),
      window_s_(window_s) {
    for (size_t i = 0; i < shard_count_; ++i) shards_[i].work.assign(slots, 0.0);
}

void WorkMeter::decayLocked(Shard& shard, double now_s) const {
    // One factor for every slot; a clock that steps back (it should not) does
    // not grow the values.
    if (now_s <= shard.at_s) return;
    const double window_s = window_s_.load(std::memory_order_relaxed);
    const double factor = window_s > 0 ? std::exp(-(now_s - shard.at_s) / window_s) : 1.0;
    for (double& w : shard.work) w *= factor;
    shard.at_s = now_s;
}

template <typename F>
void WorkMeter::forEachUsed(double now_s, F&& f) const {
    for (size_t i = 0; i < shard_count_; ++i) {
        Shard& shard = shards_[i];
        if (!shard.used.load(std::memory_order_acquire)) continue;
        std::lock_guard hold(shard.lock);
        decayLocked(shard, now_s);
        f(shard);
    }
}

void WorkMeter::add(size_t slot, double tokens, double now_s, size_t shard_index) {
    if (slot >= slots_) return;
    Shard& shard = shards_[shard_index % shard_count_];
    std::lock_guard hold(shard.lock);
    decayLocked(shard, now_s);
    shard.work[slot] = std::max(0.0, shard.work[slot] + tokens);
    if (!shard.used.load(std::memory_order_relaxed)) shard.used.store(true, std::memory_order_release);
}

void WorkMeter::values(std::span<const size_t> indexes, double now_s, std::span<double> out) const {
    const size_t n = std::min(indexes.size(), out.size());
    std::fill_n(out.begin(), n, 0.0);
    forEachUsed(now_s, [&](const Shard& shard) {
        for (size_t i = 0; i < n; ++i)
            if (indexes[i] < slots_) out[i] += shard.work[indexes[i]];
    });
}

double WorkMeter::value(size_t slot, double now_s) const {
    double total = 0;
    if (slot < slots_) forEachUsed(now_s, [&](const Shard& shard) { total += shard.work[slot]; });
    return total;
}

void WorkMeter::setWindow(double window_s) { window_s_.store(window_s, std::memory_order_relaxed); }

}  // namespace dpgate::routing
