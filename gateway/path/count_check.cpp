#include "gateway/path/count_check.hpp"

#include "gateway/platform/log.hpp"

#include <cstdio>
#include <ctime>

namespace dpgate::gateway {

namespace {

std::string utcStamp(std::chrono::system_clock::time_point time) {
    std::time_t t = std::chrono::system_clock::to_time_t(time);
    auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[40];
    size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(stamp + n, sizeof stamp - n, ".%03dZ", int(millis));
    return stamp;
}

}  // namespace

CountCheck::CountCheck(metrics::GatewayMetrics& metrics, const std::vector<conf::BackendConfig>& backends) {
    for (const conf::BackendConfig& backend : backends) {
        names_.push_back(backend.name);
        checks_.push_back(&metrics.count_checks.with({backend.name}));
        mismatches_.push_back(&metrics.count_mismatches.with({backend.name}));
    }
}

std::optional<AccessRecord::CountMismatch> CountCheck::compare(size_t backend, uint32_t rank,
                                                               std::string_view request_id,
                                                               uint64_t dpgate_prompt_tokens,
                                                               uint64_t backend_prompt_tokens) {
    if (backend >= names_.size()) return std::nullopt;
    checks_[backend]->inc();
    if (dpgate_prompt_tokens == backend_prompt_tokens) return std::nullopt;
    mismatches_[backend]->inc();

    const auto now = std::chrono::steady_clock::now();
    std::string message;
    {
        std::lock_guard lock(mutex_);
        last_ = Mismatch{.backend = names_[backend],
                         .rank = rank,
                         .request_id = std::string(request_id),
                         .dpgate_prompt_tokens = dpgate_prompt_tokens,
                         .backend_prompt_tokens = backend_prompt_tokens,
                         .time = std::chrono::system_clock::now()};
        if (!last_logged_ || now - *last_logged_ >= kLogInterval) {
            message = "prompt token count mismatch: request " + std::string(request_id) + " on backend " +
                      names_[backend] + " rank " + std::to_string(rank) + ": dpgate counted " +
                      std::to_string(dpgate_prompt_tokens) + ", the backend reported " +
                      std::to_string(backend_prompt_tokens) +
                      "; the backend's chat template or tokenizer is not dpgate's, so window refusals are wrong";
            if (unlogged_ > 0)
                message += "; " + std::to_string(unlogged_) + " more since the previous such line were not logged";
            message += " (one line a minute at most; dpgate_count_mismatches_total counts every one)";
            last_logged_ = now;
            unlogged_ = 0;
        } else {
            ++unlogged_;
        }
    }
    if (!message.empty()) logLine(LogLevel::warn, message);
    return AccessRecord::CountMismatch{dpgate_prompt_tokens, backend_prompt_tokens};
}

nlohmann::json CountCheck::lastMismatch() const {
    std::lock_guard lock(mutex_);
    if (!last_) return nullptr;
    return {{"backend", last_->backend},
            {"rank", last_->rank},
            {"request_id", last_->request_id},
            {"dpgate_prompt_tokens", last_->dpgate_prompt_tokens},
            {"backend_prompt_tokens", last_->backend_prompt_tokens},
            {"time", utcStamp(last_->time)}};
}

}  // namespace dpgate::gateway
