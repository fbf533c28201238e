// In-flight counts held for exactly as long as the thing they count: taken
// on construction, given back on destruction, however the scope is left
// (an early co_return, an exception).
#pragma once

#include "gateway/metrics/metric_family.hpp"

#include <atomic>
#include <cstdint>

namespace dpgate::gateway {

class InFlight {
public:
    explicit InFlight(std::atomic<int64_t>& count) : count_(count) { count_.fetch_add(1, std::memory_order_relaxed); }
    ~InFlight() { count_.fetch_sub(1, std::memory_order_relaxed); }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

private:
    std::atomic<int64_t>& count_;
};

// The same for a gauge child; a null gauge (metrics off) holds nothing.
class GaugeInFlight {
public:
    explicit GaugeInFlight(metrics::Gauge* gauge) : gauge_(gauge) {
        if (gauge_) gauge_->inc();
    }
    ~GaugeInFlight() {
        if (gauge_) gauge_->dec();
    }
    GaugeInFlight(const GaugeInFlight&) = delete;
    GaugeInFlight& operator=(const GaugeInFlight&) = delete;

private:
    metrics::Gauge* gauge_;
};

}  // namespace dpgate::gateway
