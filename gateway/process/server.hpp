// The dpgate process: worker threads, the backend registry and its health
// probes, the admin listener, signals and graceful drain.
#pragma once

#include "admission/tokenizer/shared_segment_cache.hpp"
#include "admission/tokenizer/tokenizer.hpp"
#include "conf/config.hpp"
#include "gateway/acceptance/record_store.hpp"
#include "gateway/auth/key_limiter.hpp"
#include "gateway/auth/key_store.hpp"
#include "gateway/backends/backend_registry.hpp"
#include "gateway/backends/role_ledger.hpp"
#include "gateway/backends/router.hpp"
#include "gateway/budget/budgets.hpp"
#include "gateway/control/control_plane.hpp"
#include "gateway/http/body_budget.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/metrics/sharded_count.hpp"
#include "gateway/net/connections_per_address.hpp"
#include "gateway/net/net.hpp"
#include "gateway/ops/operator_actions.hpp"
#include "gateway/path/access_log.hpp"
#include "gateway/path/count_check.hpp"
#include "gateway/path/model_files.hpp"
#include "gateway/path/path_parts.hpp"
#include "gateway/platform/published.hpp"

#include <boost/asio/ssl/context.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

namespace dpgate::gateway {

class Worker;
class AdmissionPool;
class HealthChecker;
class AdminListener;

struct ServeOptions {
    bool ignore_state = false;      // --ignore-state: roles from the config, not state.dir
    std::string version = "0.0.0";  // what membership records say this replica runs
};

class Server final : public OperatorActions, public StatusReadings {
public:
    explicit Server(conf::Config config, ServeOptions options = {});
    ~Server() override;

    // Binds, serves until SIGTERM/SIGINT and the drain that follows. Returns
    // the process exit code.
    int run();

    // The config in force. Every config ever loaded stays alive (reloads are
    // rare and small), so a reference taken before a reload stays valid in
    // the coroutine that holds it.
    const conf::Config& config() const override { return *current_.load(std::memory_order_acquire); }

    // Re-reads config().source_path, validates it and swaps it in; returns
    // why it was refused (the running config then stays). A config that
    // requires keys and has none would lock every client out: refused
    // unless `allow_no_keys` (SIGHUP never allows it).
    std::optional<std::string> reload(ReloadOptions options) override;
    // For the calling thread only (LocalRef).
    LocalRef<const auth::KeyStore> keys() const override { return keys_.local(); }
    // Rereads acceptance.dir and tells the registry, per backend, whether a
    // passing record matches what it reports now (and the window accepted).
    void refreshAcceptance() override;
    int64_t openConnections() const override { return open_connections_.load(std::memory_order_relaxed); }
    int64_t requestsInFlight() const override { return requests_in_flight_.value(); }
    uint64_t bufferedBodyBytes() const override { return body_budget_.heldBytes(); }

    // Where access-log lines go; reopened on reload (log rotation).
    std::shared_ptr<AccessLogSink> accessLog() const { return access_log_.load(); }
    // The client listener's TLS context (null: plain HTTP); rebuilt on
    // reload, so a renewed certificate needs no restart.
    std::shared_ptr<net::ssl::context> tlsContext() const { return tls_.load(); }
    // The served model's tokenizer and chat template (either may be null).
    const ModelFiles& modelFiles() const { return model_files_; }
    // The segment counts every worker's counters share (half of
    // model.count_cache_bytes; the workers' own caches split the other half).
    const std::shared_ptr<admission::SharedSegmentCache>& sharedSegments() const { return shared_segments_; }

    // The admission pool's size: config admission_threads, or as many as the workers,
    // at least two.
    size_t admissionThreads() const;

    std::atomic<int64_t>& connectionCount() { return open_connections_; }
    // Request bodies held in memory by every worker (limits.max_buffered_body_bytes).
    BodyBudget& bodyBudget() { return body_budget_; }
    // Client connections per peer address (limits.max_connections_per_ip).
    ConnectionsPerAddress& connectionsPerAddress() { return connections_per_address_; }
    // At max_connections: closes the idle connection (waiting for a request,
    // or lingering) that has been idle longest, on whichever worker holds it
    // (at once on `asking`'s thread, else posted to its own). False when no
    // worker has one.
    bool evictIdleConnection(Worker& asking);
    // Per backend: idle upstream connections over all workers (UpstreamPool).
    std::span<metrics::ShardedCount<int64_t>> idleUpstream() { return {idle_upstream_.get(), config_.backends.size()}; }
    metrics::ShardedCount<int64_t>& requestCount() { return requests_in_flight_; }
    metrics::GatewayMetrics& metrics() { return metrics_; }

private:
    void beginShutdown();
    void countReplicas();
    void pollDrain(std::chrono::steady_clock::time_point deadline);

    conf::Config config_;                                        // the first epoch
    std::vector<std::unique_ptr<const conf::Config>> reloaded_;  // later epochs, never freed
    std::atomic<const conf::Config*> current_;
    std::mutex reload_mutex_;
    ModelFiles model_files_;
    std::shared_ptr<admission::SharedSegmentCache> shared_segments_;
    Published<const auth::KeyStore> keys_;
    Published<AccessLogSink> access_log_;
    Published<net::ssl::context> tls_;
    metrics::GatewayMetrics metrics_;
    Published<auth::KeyLimiter> key_limiter_;
    // The live replicas the control store lists (1 without one), refreshed
    // each health interval: a replica's share of a budget while Redis is away.
    std::atomic<uint32_t> live_replicas_{1};
    budget::Budgets budgets_;
    BackendRegistry backends_;
    Router router_;
    CountCheck count_check_;
    const std::string version_;
    RoleLedger roles_;
    acceptance::RecordStore records_;
    std::unique_ptr<net::steady_timer> acceptance_timer_;
    // Counters outlive the workers: sessions destroyed with a worker's
    // io_context still decrement them.
    std::atomic<int64_t> open_connections_{0};
    BodyBudget body_budget_;
    ConnectionsPerAddress connections_per_address_;
    // Moved by every request on every worker: sharded (sharded_count.hpp).
    metrics::ShardedCount<int64_t> requests_in_flight_;
    // Per backend: idle upstream connections over all workers (UpstreamPool).
    std::unique_ptr<metrics::ShardedCount<int64_t>[]> idle_upstream_;
    // Stopped and joined first in ~Server: its work reads request bodies
    // that live in the workers' coroutine frames.
    std::unique_ptr<AdmissionPool> admission_pool_;
    // What every worker's requests share (path_parts.hpp).
    std::unique_ptr<PathShared> path_shared_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::unique_ptr<HealthChecker> health_;
    std::unique_ptr<control::ControlPlane> control_;
    std::unique_ptr<AdminListener> admin_;
    std::unique_ptr<net::steady_timer> drain_timer_;
    bool shutting_down_ = false;
};

}  // namespace dpgate::gateway
