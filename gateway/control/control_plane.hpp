// Replicas acting as one. With control.etcd, the roles (which backend is
// primary), the drained set and the flips live in one etcd key,
// `<prefix>state` (acceptance/role_state.hpp's JSON); every replica watches
// the prefix and applies each change; a flip or a drain is one etcd
// transaction guarded by the state's mod_revision, so of two racing flips
// exactly one wins. Each replica also holds `<prefix>replicas/<id>` on a
// lease (what it runs and routes to, for status), and publishes its passing
// acceptance records under `<prefix>acceptance/<backend>/<sha256>`, so a flip
// through any replica finds a record `dpgate accept` wrote on another.
//
// All etcd traffic runs on a thread of its own; worker threads never wait
// on etcd. When etcd cannot be reached, traffic goes on with the roles last
// applied (fail static), flips and drains are refused, and the replica
// resyncs from a fresh read when etcd is back. Without control.etcd, the
// roles stay in state.dir as before and the plane only reports "local".
#pragma once

#include "conf/config.hpp"
#include "gateway/acceptance/role_state.hpp"
#include "gateway/net/net.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace dpgate::acceptance {
class RecordStore;
}
namespace dpgate::metrics {
struct GatewayMetrics;
}

namespace dpgate::gateway {
class BackendRegistry;
class RoleLedger;
}  // namespace dpgate::gateway

namespace dpgate::gateway::control {

class EtcdClient;

// What the plane reads and changes of the process.
struct ControlPieces {
    BackendRegistry& backends;
    RoleLedger& roles;
    acceptance::RecordStore& records;
    metrics::GatewayMetrics& metrics;
    // Rereads the records and tells the registry which backends are
    // accepted (another replica's records arrived). Thread-safe.
    std::function<void()> acceptance_changed;
};

// `dpgate check`'s line on where the roles live and why.
std::string describeControl(const conf::Config& config);

// What became of a flip or a drain.
struct ControlOutcome {
    enum class Kind { done, conflict, unavailable, refused };
    Kind kind = Kind::done;
    std::string message;  // for the operator, when not done
};

class ControlPlane {
public:
    ControlPlane(const conf::Config& config, ControlPieces pieces, std::string version, uint16_t listen_port);
    ~ControlPlane();
    ControlPlane(const ControlPlane&) = delete;
    ControlPlane& operator=(const ControlPlane&) = delete;

    // Whether control.etcd is set: flips and drains go through etcd.
    bool shared() const { return shared_; }
    // Whether etcd answered last time it was asked (always true without control.etcd).
    bool reachable() const {
        std::lock_guard lock(mutex_);
        return !shared_ || reachable_;
    }
    // Why not, when it is not.
    std::string lastError() const {
        std::lock_guard lock(mutex_);
        return last_error_;
    }

    // Reads the shared state once (seeding it from this replica's roles when
    // etcd has none) and applies it, waiting at most the dial and request
    // timeouts; then keeps watching on the control thread. When etcd cannot
    // be reached, the replica starts from state.dir's cache (or the config)
    // and says so.
    void start();
    void stop();

    // A flip to `event.to` checked against `from`, the primary this replica
    // saw when it checked the target: refused (conflict) when etcd's primary
    // is another by now, or when another flip commits first.
    awaitable<ControlOutcome> flip(std::string from, acceptance::FlipEvent event);
    awaitable<ControlOutcome> drain(std::string name, bool drained);

    // {"store", "reachable", "revision", ...} for /admin/status's "control".
    nlohmann::json controlJson() const;
    // Every replica's membership record, with "self", "lagging" and
    // "other_config" flags; [] without control.etcd.
    nlohmann::json replicasJson() const;

private:
    struct Shared;  // what the control thread keeps

    awaitable<void> firstSync(std::shared_ptr<std::promise<void>> done);
    awaitable<bool> resync();
    awaitable<void> revokeLease(std::shared_ptr<std::promise<void>> done);
    awaitable<void> watchLoop();
    awaitable<void> memberLoop();
    awaitable<bool> publishMember();
    awaitable<void> publishRecords();
    nlohmann::json memberJson() const;
    awaitable<ControlOutcome> commit(std::function<std::string(acceptance::RoleState&)> change, bool retry);
    void applyKv(const std::string& key, const std::string& value, int64_t mod_revision, bool deleted);
    void applyState(const acceptance::RoleState& state, int64_t revision);
    void setReachable(bool reachable, const std::string& error);
    acceptance::RoleState localRoles() const;
    std::string key(std::string_view name) const { return config_.control.etcd.prefix + std::string(name); }

    const conf::Config& config_;
    ControlPieces pieces_;
    const bool shared_;
    const std::string version_;
    std::string replica_id_;
    net::io_context io_;
    std::unique_ptr<EtcdClient> client_;
    std::thread thread_;
    bool stopped_ = false;  // control thread only
    std::unique_ptr<Shared> shared_state_;
    std::function<void()> close_watch_;  // control thread only

    mutable std::mutex mutex_;  // guards what status reads
    bool reachable_ = false;
    std::string last_error_;
    std::string source_;  // "etcd" | "cache" | "config"
    int64_t applied_revision_ = 0;
    std::string applied_at_;
    int64_t latest_revision_ = 0;                    // the state's newest mod_revision seen
    std::map<std::string, nlohmann::json> members_;  // by replica id
};

}  // namespace dpgate::gateway::control
