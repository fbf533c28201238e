#include "gateway/backends/backend_registry.hpp"

#include "gateway/platform/log.hpp"

#include <algorithm>

namespace dpgate::gateway {
namespace {

routing::SlotChooserOptions chooserOptions(const conf::RoutingConfig& routing) {
    routing::SlotChooserOptions options;
    options.balance_factor = routing.balance_factor;
    options.work_factor = routing.work_balance_factor;
    options.work_slack_tokens = double(routing.work_slack_tokens);
    return options;
}

BackendHealth healthOf(const routing::HealthState& state) {
    if (!state.probed()) return BackendHealth::unknown;
    return state.up() ? BackendHealth::healthy : BackendHealth::down;
}

}  // namespace

const char* toString(BackendHealth health) {
    switch (health) {
        case BackendHealth::unknown: return "unknown";
        case BackendHealth::healthy: return "healthy";
        case BackendHealth::down: return "down";
    }
    return "unknown";
}

acceptance::BackendIdentity identityOf(const std::string& model_id, const std::vector<std::string>& model_ids,
                                       uint64_t max_model_len, const std::string& version, const std::string& server) {
    bool serves = std::find(model_ids.begin(), model_ids.end(), model_id) != model_ids.end();
    return {serves ? model_id : model_ids.empty() ? std::string() : model_ids.front(), max_model_len, version, server};
}

acceptance::BackendIdentity identityOf(const std::string& model_id, const ProbeResult& probe) {
    return identityOf(model_id, probe.model_ids, probe.max_model_len, probe.version, probe.server);
}

BackendRegistry::BackendRegistry(const conf::Config& config)
    : model_id_(config.model.id),
      configured_window_(config.model.window_tokens),
      mode_(config.routing.mode),
      failover_requires_acceptance_(config.routing.failover_requires_acceptance),
      chooser_options_(chooserOptions(config.routing)),
      public_window_(config.model.window_tokens) {
    size_t slots = 0;
    for (const auto& b : config.backends) {
        backends_.emplace_back(b, routing::HealthState(config.health.fall, config.health.rise));
        load_offset_.push_back(slots);
        slots += b.dp_ranks;
    }
    std::lock_guard lock(mutex_);
    republishLocked();
}

std::optional<size_t> BackendRegistry::find(std::string_view name) const {
    for (size_t i = 0; i < backends_.size(); ++i)
        if (backends_[i].config.name == name) return i;
    return std::nullopt;
}

void BackendRegistry::applyReload(uint64_t configured_window, const conf::RoutingConfig& routing) {
    std::lock_guard lock(mutex_);
    configured_window_ = configured_window;
    chooser_options_ = chooserOptions(routing);
    failover_requires_acceptance_ = routing.failover_requires_acceptance;
    table_mask_ = ~uint64_t{0};  // rebuild the table with the new factor
    republishLocked();
}

void BackendRegistry::applyRoles(const std::string& primary, const std::vector<std::string>& drained) {
    std::lock_guard lock(mutex_);
    for (Backend& b : backends_) {
        if (!primary.empty())
            b.role = b.config.name == primary ? conf::BackendRole::primary : conf::BackendRole::standby;
        b.drained = std::find(drained.begin(), drained.end(), b.config.name) != drained.end();
    }
    table_mask_ = ~uint64_t{0};
    republishLocked();
}

void BackendRegistry::setAcceptance(size_t index, bool matches, uint64_t accepted_window) {
    std::lock_guard lock(mutex_);
    Backend& b = backends_.at(index);
    if (b.accepted == matches && b.accepted_window == accepted_window) return;
    b.accepted = matches;
    b.accepted_window = accepted_window;
    table_mask_ = ~uint64_t{0};  // failover's pool may change with it
    republishLocked();
}

acceptance::BackendIdentity BackendRegistry::identity(size_t index) const {
    std::lock_guard lock(mutex_);
    const Backend& b = backends_.at(index);
    return identityOf(model_id_, b.model_ids, b.reported_window, b.version, b.server);
}

std::string BackendRegistry::primaryName() const {
    std::lock_guard lock(mutex_);
    for (const Backend& b : backends_)
        if (b.role == conf::BackendRole::primary) return b.config.name;
    return {};
}

std::optional<UnacceptedFailover> BackendRegistry::unacceptedFailover() const {
    std::lock_guard lock(mutex_);
    return unaccepted_failover_;
}

void BackendRegistry::setDrained(size_t index, bool drained) {
    std::lock_guard lock(mutex_);
    backends_.at(index).drained = drained;
    republishLocked();
}

std::optional<std::string> BackendRegistry::flipTo(size_t target, const ProbeResult& probe, uint64_t public_window,
                                                   std::optional<std::string_view> expect_primary, bool apply) {
    std::lock_guard lock(mutex_);
    Backend& b = backends_.at(target);
    const std::string& name = b.config.name;
    if (expect_primary) {
        // Checked under the same lock as the flip: the operator flips what
        // they think they flip, even when another flip came in between.
        std::string current;
        for (const Backend& other : backends_)
            if (other.role == conf::BackendRole::primary) current = other.config.name;
        if (current != *expect_primary)
            return "the primary is " + (current.empty() ? std::string("none") : "'" + current + "'") + ", not '" +
                   std::string(*expect_primary) + "' as expected";
    }
    if (b.role == conf::BackendRole::primary) return name + " is already the primary";
    if (!probe.health_ok) return name + " is not healthy: " + (probe.error.empty() ? "probe failed" : probe.error);
    if (std::find(probe.model_ids.begin(), probe.model_ids.end(), model_id_) == probe.model_ids.end())
        return name + " does not serve model " + model_id_;
    if (probe.max_model_len < public_window)
        return name + " reports window " + std::to_string(probe.max_model_len) + ", public window is " +
               std::to_string(public_window);
    if (b.drained) return name + " is drained";
    if (!apply) return std::nullopt;
    for (Backend& other : backends_)
        if (other.role == conf::BackendRole::primary) other.role = conf::BackendRole::standby;
    b.role = conf::BackendRole::primary;
    b.reported_window = probe.max_model_len;
    b.model_ids = probe.model_ids;
    b.version = probe.version;
    b.server = probe.server;
    b.health.probeSucceeded();
    table_mask_ = ~uint64_t{0};  // the pool changed even if routability did not
    republishLocked();
    return std::nullopt;
}

void BackendRegistry::recordPassiveFailure(size_t index, const std::string& why) {
    std::lock_guard lock(mutex_);
    Backend& b = backends_.at(index);
    b.health.suspect();
    b.last_error = why;
    republishLocked();
}

void BackendRegistry::recordProbe(size_t index, const ProbeResult& result) {
    std::lock_guard lock(mutex_);
    Backend& b = backends_.at(index);
    bool serves_model =
        std::find(result.model_ids.begin(), result.model_ids.end(), model_id_) != result.model_ids.end();
    if (result.models_ok) {
        b.model_ids = result.model_ids;
        if (result.max_model_len != 0) b.reported_window = result.max_model_len;
        b.version = result.version;
        b.server = result.server;
    }
    if (result.health_ok && result.models_ok && serves_model) {
        b.health.probeSucceeded();
        b.last_error.clear();
    } else {
        b.health.probeFailed(result.reached);
        b.last_error = !result.error.empty() ? result.error
                       : !serves_model       ? "backend does not list model " + model_id_
                                             : "probe failed";
    }
    republishLocked();
}

void BackendRegistry::republishLocked() {
    uint64_t mask = 0;
    // An unknown backend (no verdict yet) takes no requests, and failover's
    // pool also depends on which primaries are unknown: such a primary is not
    // down (at start-up the standby's first probe can land before the
    // primary's, or the primary is not listening yet), so nothing fails over
    // until its first verdict. A request before then is answered 503 and
    // /health says unavailable, as a load balancer's readiness check wants.
    // Routing it to the unknown primary instead would win nothing: the first
    // probe goes out at start and takes milliseconds when the primary
    // listens; when it does not, the request would fail on connect.
    uint64_t primaries = 0, unprobed_primaries = 0;
    uint64_t window = configured_window_;
    for (size_t i = 0; i < backends_.size(); ++i) {
        const Backend& b = backends_[i];
        const uint64_t bit = uint64_t{1} << i;
        if (b.health.up() && !b.drained) mask |= bit;
        if (b.role == conf::BackendRole::primary) {
            primaries |= bit;
            if (!b.drained && !b.health.probed()) unprobed_primaries |= bit;
        }
        if (b.reported_window != 0) window = std::min(window, b.reported_window);
        // A backend with acceptance records serves no more than it was accepted at.
        if (b.accepted_window != 0) window = std::min(window, b.accepted_window);
    }
    public_window_.store(window, std::memory_order_relaxed);
    routable_mask_.store(mask, std::memory_order_release);
    if (mask == table_mask_ && unprobed_primaries == table_unprobed_) return;
    table_mask_ = mask;
    table_unprobed_ = unprobed_primaries;

    // Failover: the primary's slots while it is routable, else the standbys'.
    uint64_t pool = mask;
    if (mode_ == conf::RoutingMode::failover) {
        if (mask & primaries) {
            pool = mask & primaries;
            unaccepted_failover_.reset();
        } else if (unprobed_primaries != 0) {
            pool = 0;  // until the primary's first verdict, one probe away
        } else {
            pool = noteFailoverLocked(mask & ~primaries);
        }
    }
    std::vector<routing::Slot> slots;
    std::vector<size_t> load_index;
    for (size_t i = 0; i < backends_.size(); ++i) {
        if (!((pool >> i) & 1)) continue;
        for (uint32_t r = 0; r < backends_[i].config.dp_ranks; ++r) {
            slots.push_back({i, backends_[i].config.name, r});
            load_index.push_back(load_offset_[i] + r);
        }
    }
    auto table = std::make_shared<RoutingTable>(
        RoutingTable{routing::SlotChooser(std::move(slots), chooser_options_), std::move(load_index)});
    table_.store(std::shared_ptr<const RoutingTable>(std::move(table)));
}

uint64_t BackendRegistry::noteFailoverLocked(uint64_t standbys) {
    uint64_t unaccepted = 0;
    std::string names;
    for (size_t i = 0; i < backends_.size(); ++i)
        if (((standbys >> i) & 1) && !backends_[i].accepted) {
            unaccepted |= uint64_t{1} << i;
            names += (names.empty() ? "" : ", ") + backends_[i].config.name;
        }
    if (unaccepted == 0) {
        unaccepted_failover_.reset();
        return standbys;
    }
    const bool blocked = failover_requires_acceptance_;
    if (!unaccepted_failover_ || unaccepted_failover_->backends != names || unaccepted_failover_->blocked != blocked) {
        std::string message =
            blocked ? "the primary is down and standby " + names +
                          " has no passing acceptance record matching what it reports: it takes no traffic "
                          "(routing.failover_requires_acceptance)"
                    : "FAILOVER TO UNACCEPTED STANDBY: the primary is down and " + names +
                          " takes its traffic without a passing acceptance record matching what it reports";
        unaccepted_failover_ = UnacceptedFailover{names, acceptance::utcNow(), blocked, message};
        logLine(LogLevel::error, message);
    }
    return blocked ? standbys & ~unaccepted : standbys;
}

bool BackendRegistry::routable(size_t index) const {
    return (routable_mask_.load(std::memory_order_acquire) >> index) & 1;
}

BackendHealth BackendRegistry::health(size_t index) const {
    std::lock_guard lock(mutex_);
    return healthOf(backends_.at(index).health);
}

std::vector<BackendView> BackendRegistry::snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<BackendView> out;
    for (const Backend& b : backends_)
        out.push_back({b.config.name, b.role, healthOf(b.health), b.health.up(), b.health.probed(), b.drained,
                       b.reported_window, b.model_ids, b.last_error,
                       identityOf(model_id_, b.model_ids, b.reported_window, b.version, b.server), b.accepted,
                       b.accepted_window});
    return out;
}

}  // namespace dpgate::gateway
