#include "routing/work_meter.hpp"

#include <algorithm>
#include <cmath>

namespace dpgate::routing {

WorkMeter::WorkMeter(size_t slots, double window_s) : work_(slots, 0.0), window_s_(window_s) {}

void WorkMeter::decayLocked(double now_s) const {
    // One factor for every slot; a clock that steps back (it should not) does
    // not grow the values.
    if (now_s <= at_s_) return;
    const double factor = window_s_ > 0 ? std::exp(-(now_s - at_s_) / window_s_) : 1.0;
    for (double& w : work_) w *= factor;
    at_s_ = now_s;
}

void WorkMeter::add(size_t slot, double tokens, double now_s) {
    std::lock_guard lock(mutex_);
    if (slot >= work_.size()) return;
    decayLocked(now_s);
    work_[slot] = std::max(0.0, work_[slot] + tokens);
}

void WorkMeter::values(std::span<const size_t> indexes, double now_s, std::span<double> out) const {
    std::lock_guard lock(mutex_);
    decayLocked(now_s);
    for (size_t i = 0; i < indexes.size() && i < out.size(); ++i)
        out[i] = indexes[i] < work_.size() ? work_[indexes[i]] : 0.0;
}

double WorkMeter::value(size_t slot, double now_s) const {
    std::lock_guard lock(mutex_);
    decayLocked(now_s);
    return slot < work_.size() ? work_[slot] : 0.0;
}

void WorkMeter::setWindow(double window_s) {
    std::lock_guard lock(mutex_);
    window_s_ = window_s;
}

}  // namespace dpgate::routing
