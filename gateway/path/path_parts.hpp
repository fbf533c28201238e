// What a request's stages use of the process, in two parts the process
// fills once per worker: what every worker shares (PathShared) and what one
// worker's thread owns (PathLocal). A stage takes the parts it uses; none
// sees the server, the worker or the client session.
#pragma once

#include "admission/admission_limits.hpp"
#include "admission/admit.hpp"
#include "conf/config.hpp"
#include "gateway/auth/key_limiter.hpp"
#include "gateway/auth/key_store.hpp"
#include "gateway/backends/upstream_pool.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/metrics/sharded_count.hpp"
#include "gateway/net/net.hpp"
#include "gateway/path/status_readings.hpp"
#include "gateway/platform/published.hpp"

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dpgate::gateway {

namespace budget {
class Budgets;
struct KeyState;
}  // namespace budget
class AdmissionPool;
class BackendRegistry;
class CountCheck;
class Router;

// What a worker keeps of one client key: its budgets and usage (found once
// per thread: the Budgets never drop a key's state), its token counters and
// its answers by status.
struct KeyLocal {
    budget::KeyState* state = nullptr;
    metrics::Counter* prompt_tokens = nullptr;
    metrics::Counter* cached_tokens = nullptr;
    metrics::Counter* completion_tokens = nullptr;
    metrics::Counter* reserved_unused = nullptr;
    std::vector<std::pair<unsigned, metrics::Counter*>> answers;  // a handful of statuses
    metrics::Counter& answer(const std::string& key, unsigned status, metrics::GatewayMetrics& m);
};

// Shared by every worker; each piece guards itself.
struct PathShared {
    const Published<const auth::KeyStore>& keys;     // read per request, replaced by a reload
    const Published<auth::KeyLimiter>& key_limiter;  // likewise
    budget::Budgets& budgets;                        // every key's budgets and usage
    BackendRegistry& backends;                       // health, windows, roles
    Router& router;                                  // where a request goes and what it costs there
    CountCheck& count_check;                         // dpgate's prompt counts against the backends' usage
    AdmissionPool& admission_pool;                   // admission that may take long
    metrics::GatewayMetrics& metrics;                // updated only when config.metrics.enabled
    const StatusReadings& readings;                  // the process's own counts, for /metrics
};

// One worker's own: touched only on its thread.
class PathLocal {
public:
    // `idle_upstream` holds, per backend, the idle upstream connections of
    // every worker (UpstreamPool).
    PathLocal(net::io_context& io, DeadlineList& deadlines, const conf::Config& config, BackendRegistry& backends,
              metrics::GatewayMetrics& metrics, std::span<metrics::ShardedCount<int64_t>> idle_upstream,
              std::unique_ptr<admission::Admitter> admitter);

    net::io_context& io() { return io_; }
    UpstreamPool& pool(size_t backend) { return *pools_.at(backend); }
    void closeIdleUpstreams();

    // Admits what is quick on this thread; the rest goes to the AdmissionPool.
    admission::Admitter& admitter() { return *admitter_; }
    // The admission limits of `config` with the window set to the current public window.
    const admission::AdmissionLimits& admissionLimits(const conf::Config& config, uint64_t public_window);

    // Relay buffers of `bytes` (limits.relay_buffer_bytes of the request's
    // config), reused across requests: a fresh zeroed 64 KiB per request
    // showed up as memset, page faults and TLB shootdowns in the proxy
    // benchmark's profile. A reload that changes the size retires the
    // spare buffers of the old one.
    std::unique_ptr<char[]> takeRelayBuffer(size_t bytes);
    void returnRelayBuffer(std::unique_ptr<char[]> buffer, size_t bytes);

    // Metric children this worker updates, looked up once: a family's
    // with() builds label strings and takes its lock, which per request
    // showed in the metrics-on/off benchmark.
    struct SlotMetrics {
        metrics::Gauge* inflight = nullptr;
        metrics::Counter* prompt_tokens = nullptr;
        metrics::Counter* cached_prompt_tokens = nullptr;
        metrics::Counter* completion_tokens = nullptr;
    };
    SlotMetrics& slotMetrics(size_t backend, uint32_t rank);
    metrics::Counter& requestCounter(std::string_view path, unsigned status);
    // A client key's, looked up once per request (keyLocal, budget_gate.hpp).
    KeyLocal& keyLocal(const std::string& key, budget::Budgets& budgets);
    metrics::GatewayMetrics& gatewayMetrics() { return metrics_; }

private:
    net::io_context& io_;
    BackendRegistry& backends_;
    metrics::GatewayMetrics& metrics_;
    std::vector<std::unique_ptr<UpstreamPool>> pools_;
    std::unique_ptr<admission::Admitter> admitter_;
    admission::AdmissionLimits admission_limits_;
    const conf::Config* admission_limits_from_ = nullptr;  // rebuilt when a reload swaps the config
    std::vector<std::unique_ptr<char[]>> spare_buffers_;
    size_t spare_buffer_bytes_ = 0;
    std::map<std::pair<size_t, uint32_t>, SlotMetrics> slot_metrics_;
    struct RequestCounter {
        std::string path;
        unsigned status;
        metrics::Counter* counter;
    };
    std::vector<RequestCounter> request_counters_;  // a handful: two endpoints x the statuses seen
    // Keys are a config's, so the map stays as small as the keys file.
    std::map<std::string, KeyLocal, std::less<>> key_locals_;
};

}  // namespace dpgate::gateway
