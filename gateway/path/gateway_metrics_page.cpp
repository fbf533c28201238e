#include "gateway/path/gateway_metrics_page.hpp"

#include "gateway/backends/backend_registry.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/path/admission_pool.hpp"

namespace dpgate::gateway {

std::string gatewayMetricsPage(metrics::GatewayMetrics& metrics, const BackendRegistry& backends,
                               const StatusReadings& readings, const AdmissionPool& admission_pool) {
    for (const BackendView& b : backends.snapshot()) {
        // No sample before a backend's first verdict: 0 would read as down
        // and fire an alert on `dpgate_backend_up == 0` at every start.
        if (b.health == BackendHealth::unknown) continue;
        const bool primary = b.role == conf::BackendRole::primary;
        metrics.backend_up.with({b.name, "primary"}).set(primary && b.healthy ? 1 : 0);
        metrics.backend_up.with({b.name, "standby"}).set(!primary && b.healthy ? 1 : 0);
    }
    metrics.public_window_tokens.set(int64_t(backends.publicWindow()));
    metrics.open_connections.set(readings.openConnections());
    metrics.buffered_body_bytes.set(int64_t(readings.bufferedBodyBytes()));
    metrics.admission_queued.set(int64_t(admission_pool.queued()));
    return metrics.render();
}

}  // namespace dpgate::gateway
