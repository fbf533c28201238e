#include "gateway/backends/role_ledger.hpp"

#include "gateway/platform/log.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dpgate::gateway {

RoleLedger::RoleLedger(const conf::Config& config, bool ignore_state)
    : file_(config.state.dir.empty() ? std::string() : acceptance::stateFilePath(config.state.dir)),
      model_id_(config.model.id) {
    for (const conf::BackendConfig& b : config.backends) backend_names_.push_back(b.name);
    source_ = {"config", acceptance::utcNow(), file_, {}};
    std::error_code ec;
    if (file_.empty() || !std::filesystem::exists(file_, ec)) return;
    if (ignore_state) {
        logLine(LogLevel::warn, "state: " + file_ + " ignored (--ignore-state): roles come from the config");
        return;
    }
    std::ifstream in(file_, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) throw std::runtime_error("state: " + file_ + ": cannot be read");
    std::string error;
    std::optional<acceptance::RoleState> state = acceptance::parseState(text.str(), error);
    if (!state)
        throw std::runtime_error("state: " + file_ + ": corrupt: " + error +
                                 ". Start with --ignore-state to take the roles from the config (the file is "
                                 "rewritten at the next flip or drain).");
    if (std::string foreign = acceptance::foreignReason(*state, config); !foreign.empty())
        throw std::runtime_error("state: " + file_ + ": not this gateway's state: " + foreign +
                                 ". Start with --ignore-state to take the roles from the config.");
    flips_ = state->flips;
    source_ = {"state", state->written_at, file_, {}};
    resumed_ = std::move(state);
}

acceptance::RoleState RoleLedger::currentLocked(const BackendRegistry& backends) const {
    acceptance::RoleState state;
    state.model_id = model_id_;
    state.backends = backend_names_;
    for (const BackendView& b : backends.snapshot()) {
        if (b.role == conf::BackendRole::primary) state.primary = b.name;
        if (b.drained) state.drained.push_back(b.name);
    }
    state.flips = flips_;
    state.written_at = acceptance::utcNow();
    return state;
}

acceptance::RoleState RoleLedger::current(const BackendRegistry& backends) const {
    std::lock_guard lock(mutex_);
    return currentLocked(backends);
}

std::string RoleLedger::adopt(const acceptance::RoleState& state, const std::string& source,
                              const BackendRegistry& backends) {
    std::lock_guard lock(mutex_);
    flips_ = state.flips;
    source_.source = source;
    source_.since = state.written_at;
    return writeLocked(backends);
}

std::string RoleLedger::writeLocked(const BackendRegistry& backends) {
    if (file_.empty()) return {};
    const acceptance::RoleState state = currentLocked(backends);
    std::string error = acceptance::writeFileAtomically(file_, acceptance::stateJson(state));
    source_.last_write_error = error;
    if (!error.empty())
        logLine(LogLevel::error, "state: the roles were changed but not saved (a restart will lose them): " + error);
    return error;
}

std::string RoleLedger::recordFlip(acceptance::FlipEvent flip, const BackendRegistry& backends) {
    std::lock_guard lock(mutex_);
    source_.source = "flip";
    source_.since = flip.at;
    flips_.insert(flips_.begin(), std::move(flip));
    if (flips_.size() > acceptance::kKeptFlips) flips_.pop_back();
    return writeLocked(backends);
}

std::string RoleLedger::persist(const BackendRegistry& backends) {
    std::lock_guard lock(mutex_);
    return writeLocked(backends);
}

RoleLedger::Source RoleLedger::source() const {
    std::lock_guard lock(mutex_);
    return source_;
}

std::vector<acceptance::FlipEvent> RoleLedger::flips() const {
    std::lock_guard lock(mutex_);
    return flips_;
}

}  // namespace dpgate::gateway
