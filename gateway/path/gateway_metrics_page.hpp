// dpgate's own exposition page, as both ports' GET /metrics serve it: the
// gauges that mirror the registry and the process are set at scrape time
// (nothing updates them in between), then every family is rendered.
#pragma once

#include "gateway/path/status_readings.hpp"

#include <string>

namespace dpgate::metrics {
class GatewayMetrics;
}

namespace dpgate::gateway {

class AdmissionPool;
class BackendRegistry;

std::string gatewayMetricsPage(metrics::GatewayMetrics& metrics, const BackendRegistry& backends,
                               const StatusReadings& readings, const AdmissionPool& admission_pool);

}  // namespace dpgate::gateway
