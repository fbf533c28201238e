// What the admin listener reads of the running gateway and asks of it,
// without reaching the process itself: the pieces it reads (AdminPieces),
// the process's own counts (StatusReadings, path/status_readings.hpp), and what only the process can
// do (OperatorActions: reload, reread the acceptance records).
#pragma once

#include "conf/config.hpp"
#include "gateway/auth/key_store.hpp"
#include "gateway/path/status_readings.hpp"
#include "gateway/platform/local_ref.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace dpgate::admission {
class SharedSegmentCache;
}
namespace dpgate::acceptance {
class RecordStore;
}
namespace dpgate::metrics {
class GatewayMetrics;
}

namespace dpgate::gateway::budget {
class Budgets;
}
namespace dpgate::gateway::control {
class ControlPlane;
}

namespace dpgate::gateway {

class AdmissionPool;
class BackendRegistry;
class CountCheck;
class RoleLedger;
class Router;

struct ReloadOptions {
    bool allow_no_keys = false;
};

class OperatorActions {
public:
    virtual ~OperatorActions() = default;
    // The config in force (every config ever loaded stays alive).
    virtual const conf::Config& config() const = 0;
    // The key store in force, for the calling thread.
    virtual LocalRef<const auth::KeyStore> keys() const = 0;
    // Rereads the config file and swaps it in; why it was refused otherwise.
    virtual std::optional<std::string> reload(ReloadOptions options) = 0;
    // Rereads acceptance.dir and tells the registry which backends are accepted.
    virtual void refreshAcceptance() = 0;
};

struct AdminPieces {
    BackendRegistry& backends;
    Router& router;
    metrics::GatewayMetrics& metrics;
    acceptance::RecordStore& records;
    RoleLedger& roles;
    control::ControlPlane& control;
    const CountCheck& count_check;
    const admission::SharedSegmentCache& shared_segments;
    const AdmissionPool& admission_pool;
    budget::Budgets& budgets;
};

}  // namespace dpgate::gateway
