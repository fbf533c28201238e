// What the gateway currently knows about each configured backend: its health
// (from probes), the window and model it reports, and which one is primary.
// Shared by every worker thread: probes write under a mutex, the request
// path reads one atomic word.
#pragma once

#include "conf/config.hpp"
#include "routing/health_state.hpp"
#include "routing/slot_chooser.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dpgate::gateway {

struct ProbeResult {
    bool health_ok = false;  // GET /health answered 200
    bool models_ok = false;  // GET /v1/models answered a parseable list
    std::vector<std::string> model_ids;
    uint64_t max_model_len = 0;  // of the served model id; 0 = not reported
    std::string error;           // why the probe failed, for status and logs
};

// The slots requests may go to now, rebuilt whenever a backend's
// routability changes: failover mode takes the primary's ranks while it is
// routable, else the standby's; active-active takes every routable backend's.
struct RoutingTable {
    routing::SlotChooser chooser;
    std::vector<size_t> load_index;  // per chooser slot: index into the registry's load counters
};

struct BackendView {
    std::string name;
    conf::BackendRole role;
    bool healthy;
    bool drained;
    uint64_t reported_window;  // 0 = never reported
    std::vector<std::string> model_ids;
    std::string last_error;
};

class BackendRegistry {
public:
    explicit BackendRegistry(const conf::Config& config);

    size_t size() const { return backends_.size(); }
    const conf::BackendConfig& config(size_t index) const { return backends_[index].config; }

    // A probe passes when /health is 200 and /v1/models lists the served id.
    void recordProbe(size_t index, const ProbeResult& result);

    // The configured window lowered to the smallest max_model_len any backend
    // has reported (a backend that stops answering keeps its last report: a
    // standby that was ever smaller must not silently widen the window).
    uint64_t publicWindow() const { return public_window_.load(std::memory_order_relaxed); }

    bool routable(size_t index) const;
    bool anyRoutable() const { return routable_mask_.load(std::memory_order_acquire) != 0; }

    // Null or empty when nothing is routable.
    std::shared_ptr<const RoutingTable> routingTable() const { return std::atomic_load(&table_); }

    // Where (backend b, rank i) sits in the per-rank counters the Router
    // keeps (router.hpp) and in RoutingTable::load_index.
    size_t loadIndex(size_t backend, uint32_t rank) const { return load_offset_[backend] + rank; }

    // A connect failure or a 502/503/504: no new requests until a probe passes.
    void recordPassiveFailure(size_t index, const std::string& why);

    std::optional<size_t> find(std::string_view name) const;
    // A reloaded config's window and routing factors.
    void applyReload(uint64_t configured_window, const conf::RoutingConfig& routing);
    // Drained: no new requests; those in flight finish.
    void setDrained(size_t index, bool drained);

    // Makes `target` (a standby) the primary if `probe` — taken just now —
    // proves it can serve the public window: healthy, serving the model id,
    // reporting max_model_len >= `public_window`. The old primary becomes a
    // standby. Returns the reason when it refuses.
    // With `expect_primary`, it also refuses when the primary is not that
    // backend (checked atomically with the flip).
    std::optional<std::string> flipTo(size_t target, const ProbeResult& probe, uint64_t public_window,
                                      std::optional<std::string_view> expect_primary = std::nullopt);

    std::vector<BackendView> snapshot() const;

private:
    struct Backend {
        conf::BackendConfig config;
        routing::HealthState health;
        conf::BackendRole role;  // starts as configured; /admin/flip swaps it
        bool drained = false;
        uint64_t reported_window = 0;
        std::vector<std::string> model_ids;
        std::string last_error;
    };

    void republishLocked();

    const std::string model_id_;
    uint64_t configured_window_;
    const conf::RoutingMode mode_;
    routing::SlotChooserOptions chooser_options_;
    std::vector<size_t> load_offset_;
    std::shared_ptr<const RoutingTable> table_;  // read with std::atomic_load
    uint64_t table_mask_ = ~uint64_t{0};
    mutable std::mutex mutex_;
    std::vector<Backend> backends_;
    std::atomic<uint64_t> routable_mask_{0};  // bit i: backend i may take requests
    std::atomic<uint64_t> public_window_;
};

}  // namespace dpgate::gateway
