#include "gateway/backend_registry.hpp"

#include <algorithm>

namespace dpgate::gateway {

BackendRegistry::BackendRegistry(const conf::Config& config)
    : model_id_(config.model.id),
      configured_window_(config.model.window_tokens),
      public_window_(config.model.window_tokens) {
    for (const auto& b : config.backends) {
        Backend backend{b, routing::HealthState(config.health.fall, config.health.rise), false, 0, {}, {}};
        backends_.push_back(std::move(backend));
    }
}

void BackendRegistry::recordProbe(size_t index, const ProbeResult& result) {
    std::lock_guard lock(mutex_);
    Backend& b = backends_.at(index);
    bool serves_model = std::find(result.model_ids.begin(), result.model_ids.end(), model_id_) != result.model_ids.end();
    if (result.models_ok) {
        b.model_ids = result.model_ids;
        if (result.max_model_len != 0) b.reported_window = result.max_model_len;
    }
    if (result.health_ok && result.models_ok && serves_model) {
        b.health.probeSucceeded();
        b.last_error.clear();
    } else {
        b.health.probeFailed();
        b.last_error = !result.error.empty() ? result.error
                       : !serves_model      ? "backend does not list model " + model_id_
                                            : "probe failed";
    }
    republishLocked();
}

void BackendRegistry::republishLocked() {
    uint64_t mask = 0;
    uint64_t window = configured_window_;
    for (size_t i = 0; i < backends_.size(); ++i) {
        const Backend& b = backends_[i];
        if (b.health.up() && !b.drained) mask |= uint64_t{1} << i;
        if (b.reported_window != 0) window = std::min(window, b.reported_window);
    }
    public_window_.store(window, std::memory_order_relaxed);
    routable_mask_.store(mask, std::memory_order_release);
}

bool BackendRegistry::routable(size_t index) const {
    return (routable_mask_.load(std::memory_order_acquire) >> index) & 1;
}

std::optional<size_t> BackendRegistry::chooseBackend() const {
    uint64_t mask = routable_mask_.load(std::memory_order_acquire);
    for (size_t i = 0; i < backends_.size(); ++i)
        if (backends_[i].config.role == conf::BackendRole::primary && ((mask >> i) & 1)) return i;
    for (size_t i = 0; i < backends_.size(); ++i)
        if ((mask >> i) & 1) return i;
    return std::nullopt;
}

std::vector<BackendView> BackendRegistry::snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<BackendView> out;
    for (const Backend& b : backends_)
        out.push_back({b.config.name, b.config.role, b.health.up(), b.drained, b.reported_window, b.model_ids,
                       b.last_error});
    return out;
}

}  // namespace dpgate::gateway
