// What the gateway currently knows about each configured backend: its health
// (from probes), the window and model it reports, and which one is primary.
// Shared by every worker thread: probes write under a mutex, the request
// path reads one atomic word.
#pragma once

#include "conf/config.hpp"
#include "gateway/acceptance/acceptance_record.hpp"
#include "gateway/platform/published.hpp"
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
    std::string version;         // GET /version's "version"; "" = not answered
    std::string server;          // the Server header of GET /v1/models
    std::string error;           // why the probe failed, for status and logs
    bool reached = false;        // a connection was made (false: nothing listens there, or no such host)
};

// What a backend says of itself, from a probe: the served model id when it
// lists it (else the first it lists), its window, version and server.
acceptance::BackendIdentity identityOf(const std::string& model_id, const ProbeResult& probe);
acceptance::BackendIdentity identityOf(const std::string& model_id, const std::vector<std::string>& model_ids,
                                       uint64_t max_model_len, const std::string& version, const std::string& server);

// The slots requests may go to now, rebuilt whenever a backend's
// routability changes: failover mode takes the primary's ranks while it is
// routable, else the standby's; active-active takes every routable backend's.
struct RoutingTable {
    routing::SlotChooser chooser;
    std::vector<size_t> load_index;  // per chooser slot: index into the registry's load counters
};

// What the probes say of a backend. Unknown until its first verdict (health_state.hpp):
// not down, so nothing alarms, fails over or reads as down because of it.
enum class BackendHealth { unknown, healthy, down };
const char* toString(BackendHealth health);

struct BackendView {
    std::string name;
    conf::BackendRole role;
    BackendHealth health;
    bool healthy;  // health == healthy
    bool probed;   // health != unknown
    bool drained;
    uint64_t reported_window;  // 0 = never reported
    std::vector<std::string> model_ids;
    std::string last_error;
    acceptance::BackendIdentity identity;  // as last probed (max_model_len 0: never)
    bool accepted;                         // a passing record matches `identity`
    uint64_t accepted_window;              // largest window of its passing records; 0 = none
};

// Failover went (or would go) to a standby without a passing acceptance
// record for what it reports now.
struct UnacceptedFailover {
    std::string backends;  // the standbys taking (or refused) the traffic
    std::string at;        // UTC
    bool blocked = false;  // routing.failover_requires_acceptance held it back
    std::string message;
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
    BackendHealth health(size_t index) const;
    bool anyRoutable() const { return routable_mask_.load(std::memory_order_acquire) != 0; }

    // Null or empty when nothing is routable. For the calling thread only
    // (LocalRef): a request's plan holds it.
    LocalRef<const RoutingTable> routingTable() const { return table_.local(); }

    // Where (backend b, rank i) sits in the per-rank counters the Router
    // keeps (router.hpp) and in RoutingTable::load_index.
    size_t loadIndex(size_t backend, uint32_t rank) const { return load_offset_[backend] + rank; }

    // A connect failure or a 502/503/504: no new requests until a probe passes.
    void recordPassiveFailure(size_t index, const std::string& why);

    std::optional<size_t> find(std::string_view name) const;
    // A reloaded config's window and routing factors.
    void applyReload(uint64_t configured_window, const conf::RoutingConfig& routing);
    // Roles and drained set resumed from the state file (names it knows).
    void applyRoles(const std::string& primary, const std::vector<std::string>& drained);
    // What the acceptance records say of backend `index` (record_store.hpp):
    // whether a passing one matches its identity now, and the largest
    // window any passing one was accepted at (0: none). A backend with a
    // record caps the public window at that; one without any does not.
    void setAcceptance(size_t index, bool matches, uint64_t accepted_window);
    acceptance::BackendIdentity identity(size_t index) const;
    std::string primaryName() const;
    std::optional<UnacceptedFailover> unacceptedFailover() const;
    // Drained: no new requests; those in flight finish.
    void setDrained(size_t index, bool drained);

    // Makes `target` (a standby) the primary if `probe` — taken just now —
    // proves it can serve the public window: healthy, serving the model id,
    // reporting max_model_len >= `public_window`. The old primary becomes a
    // standby. Returns the reason when it refuses.
    // With `expect_primary`, it also refuses when the primary is not that
    // backend (checked atomically with the flip).
    // `apply` false: only says whether it would refuse.
    std::optional<std::string> flipTo(size_t target, const ProbeResult& probe, uint64_t public_window,
                                      std::optional<std::string_view> expect_primary = std::nullopt, bool apply = true);

    std::vector<BackendView> snapshot() const;

private:
    struct Backend {
        Backend(conf::BackendConfig c, routing::HealthState h) : config(std::move(c)), health(h), role(config.role) {}
        conf::BackendConfig config;
        routing::HealthState health;
        conf::BackendRole role;  // starts as configured; /admin/flip swaps it
        bool drained = false;
        uint64_t reported_window = 0;
        std::vector<std::string> model_ids;
        std::string last_error;
        std::string version;
        std::string server;
        bool accepted = false;
        uint64_t accepted_window = 0;
    };

    void republishLocked();
    // Failover's pool from the routable standbys: all of them, or only the
    // accepted ones under failover_requires_acceptance; notes and logs an
    // unaccepted failover.
    uint64_t noteFailoverLocked(uint64_t standbys);

    const std::string model_id_;
    uint64_t configured_window_;
    const conf::RoutingMode mode_;
    bool failover_requires_acceptance_;
    std::optional<UnacceptedFailover> unaccepted_failover_;
    routing::SlotChooserOptions chooser_options_;
    std::vector<size_t> load_offset_;
    Published<const RoutingTable> table_;
    // What table_ was built from: the routable backends, and the primaries
    // not probed yet (failover holds the standbys back for those).
    uint64_t table_mask_ = ~uint64_t{0};
    uint64_t table_unprobed_ = 0;
    mutable std::mutex mutex_;
    std::vector<Backend> backends_;
    std::atomic<uint64_t> routable_mask_{0};  // bit i: backend i may take requests
    std::atomic<uint64_t> public_window_;
};

}  // namespace dpgate::gateway
