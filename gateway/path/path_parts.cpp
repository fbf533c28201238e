#include "gateway/path/path_parts.hpp"

#include "gateway/budget/budgets.hpp"

#include "gateway/backends/backend_registry.hpp"

namespace dpgate::gateway {

PathLocal::PathLocal(net::io_context& io, DeadlineList& deadlines, const conf::Config& config,
                     BackendRegistry& backends, metrics::GatewayMetrics& metrics,
                     std::span<metrics::ShardedCount<int64_t>> idle_upstream,
                     std::unique_ptr<admission::Admitter> admitter)
    : io_(io), backends_(backends), metrics_(metrics), admitter_(std::move(admitter)) {
    for (size_t b = 0; b < config.backends.size(); ++b)
        pools_.push_back(std::make_unique<UpstreamPool>(
            io, deadlines, config.backends[b], idle_upstream[b], config.limits.upstream_max_idle_connections,
            config.limits.upstream_connect_timeout_ms, config.limits.upstream_idle_timeout_ms));
}

void PathLocal::closeIdleUpstreams() {
    for (auto& pool : pools_) pool->closeIdle();
}

const admission::AdmissionLimits& PathLocal::admissionLimits(const conf::Config& config, uint64_t public_window) {
    if (&config != admission_limits_from_) {
        admission_limits_from_ = &config;
        admission_limits_.served_model_id = config.model.id;
        admission_limits_.model_aliases = config.model.aliases;
        admission_limits_.max_output_tokens = config.model.max_output_tokens;
        admission_limits_.image_reserve_tokens = config.model.image_reserve_tokens;
        admission_limits_.max_images = config.model.max_images;
        admission_limits_.max_body_bytes = config.limits.max_body_bytes;
        admission_limits_.max_json_depth = config.limits.max_json_depth;
        admission_limits_.max_n = config.limits.max_n;
    }
    admission_limits_.window_tokens = public_window;
    return admission_limits_;
}

std::unique_ptr<char[]> PathLocal::takeRelayBuffer(size_t bytes) {
    if (bytes != spare_buffer_bytes_) {
        spare_buffers_.clear();
        spare_buffer_bytes_ = bytes;
    }
    if (spare_buffers_.empty()) return std::make_unique_for_overwrite<char[]>(bytes);
    std::unique_ptr<char[]> buffer = std::move(spare_buffers_.back());
    spare_buffers_.pop_back();
    return buffer;
}

void PathLocal::returnRelayBuffer(std::unique_ptr<char[]> buffer, size_t bytes) {
    // Keep as many as were ever in use at once, up to a bound: memory
    // follows the peak of concurrent relays, not the request count.
    if (bytes == spare_buffer_bytes_ && spare_buffers_.size() < 256) spare_buffers_.push_back(std::move(buffer));
}

PathLocal::SlotMetrics& PathLocal::slotMetrics(size_t backend, uint32_t rank) {
    SlotMetrics& slot = slot_metrics_[{backend, rank}];
    if (!slot.inflight) {
        const std::string& name = backends_.config(backend).name;
        const std::string rank_label = std::to_string(rank);
        slot.inflight = &metrics_.inflight_requests.with({name, rank_label});
        slot.prompt_tokens = &metrics_.prompt_tokens.with({name, rank_label});
        slot.cached_prompt_tokens = &metrics_.cached_prompt_tokens.with({name, rank_label});
        slot.completion_tokens = &metrics_.completion_tokens.with({name, rank_label});
    }
    return slot;
}

metrics::Counter& PathLocal::requestCounter(std::string_view path, unsigned status) {
    // Paths reaching a relay are the two completion endpoints: the list stays short.
    for (const RequestCounter& known : request_counters_)
        if (known.status == status && known.path == path) return *known.counter;
    metrics::Counter& counter = metrics_.requests.with({path, status == 0 ? "client_closed" : std::to_string(status)});
    request_counters_.push_back({std::string(path), status, &counter});
    return counter;
}

KeyLocal& PathLocal::keyLocal(const std::string& key, budget::Budgets& budgets) {
    const auto it = key_locals_.find(key);
    if (it != key_locals_.end()) return it->second;
    KeyLocal& m = key_locals_[key];
    m.state = budgets.find(key);
    m.prompt_tokens = &metrics_.key_tokens.with({key, "prompt"});
    m.cached_tokens = &metrics_.key_tokens.with({key, "cached"});
    m.completion_tokens = &metrics_.key_tokens.with({key, "completion"});
    m.reserved_unused = &metrics_.key_tokens.with({key, "reserved_unused"});
    return m;
}

metrics::Counter& KeyLocal::answer(const std::string& key, unsigned status, metrics::GatewayMetrics& m) {
    for (const auto& [known, counter] : answers)
        if (known == status) return *counter;
    metrics::Counter& counter = m.key_requests.with({key, status == 0 ? "client_closed" : std::to_string(status)});
    answers.emplace_back(status, &counter);
    return counter;
}

}  // namespace dpgate::gateway
