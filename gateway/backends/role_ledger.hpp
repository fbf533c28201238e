// The roles' memory: what state.json said at start, the flips since, and
// the file they are written to after every flip, drain and undrain (see
// acceptance/role_state.hpp). /admin/status shows where the roles came from.
#pragma once

#include "conf/config.hpp"
#include "gateway/acceptance/role_state.hpp"
#include "gateway/backends/backend_registry.hpp"

#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dpgate::gateway {

class RoleLedger {
public:
    // Reads <state.dir>/state.json unless `ignore_state`. Throws
    // std::runtime_error, naming the file and --ignore-state, when it is
    // corrupt or belongs to another config.
    RoleLedger(const conf::Config& config, bool ignore_state);

    // The roles to resume (nullopt: start from the config's).
    const std::optional<acceptance::RoleState>& resumed() const { return resumed_; }

    // Records a flip and writes the state. Returns the write error ("" when
    // written or when state.dir is not set).
    std::string recordFlip(acceptance::FlipEvent flip, const BackendRegistry& backends);
    // Writes the state after a drain or undrain.
    std::string persist(const BackendRegistry& backends);

    // The roles as the registry has them now, with the flips: what a replica
    // seeds the shared store with (gateway/control/).
    acceptance::RoleState current(const BackendRegistry& backends) const;
    // Roles the shared store gave (already applied to the registry): keeps
    // their flips and writes them to state.json, the cache a replica starts
    // from when etcd is down. `source` is "etcd".
    std::string adopt(const acceptance::RoleState& state, const std::string& source, const BackendRegistry& backends);

    struct Source {
        std::string source;  // "config" | "state" | "flip" | "etcd"
        std::string since;   // UTC
        std::string file;    // state.json's path; "" when state.dir is not set
        std::string last_write_error;
    };
    Source source() const;
    std::vector<acceptance::FlipEvent> flips() const;  // newest first

private:
    std::string writeLocked(const BackendRegistry& backends);
    acceptance::RoleState currentLocked(const BackendRegistry& backends) const;

    const std::string file_;
    const std::string model_id_;
    std::vector<std::string> backend_names_;
    std::optional<acceptance::RoleState> resumed_;
    mutable std::mutex mutex_;
    Source source_;
    std::vector<acceptance::FlipEvent> flips_;
};

}  // namespace dpgate::gateway
