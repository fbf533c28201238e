// In-flight counts held for exactly as long as the thing they count: taken
// on construction, given back on destruction, however the scope is left
// (an early co_return, an exception).
#pragma once

#include "gateway/metrics/metric_family.hpp"
#include "gateway/metrics/sharded_count.hpp"

#include <cstdint>

namespace dpgate::gateway {

class InFlight {
public:
    explicit InFlight(metrics::ShardedCount<int64_t>& count) : count_(count) { count_.add(1); }
    ~InFlight() { count_.sub(1); }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

private:
    metrics::ShardedCount<int64_t>& count_;
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
