#include "gateway/path/make_admitter.hpp"

#include "gateway/path/model_files.hpp"

#include <algorithm>
#include <ctime>

namespace dpgate::gateway {

namespace {

// The chat template's strftime_now(): whole seconds, read for every request
// rendered. CLOCK_REALTIME_COARSE is the time as of the last kernel tick,
// read by the vDSO without the time-stamp counter (5 ns against 28 ns for
// system_clock::now() here).
std::int64_t unixNow() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    return std::int64_t(now.tv_sec);
}

}  // namespace

std::unique_ptr<admission::Admitter> makeAdmitter(const conf::Config& config, const ModelFiles& model,
                                                  const std::shared_ptr<admission::SharedSegmentCache>& shared_segments,
                                                  size_t admission_threads, AdmitterRole role) {
    const size_t own = config.model.count_cache_bytes - shared_segments->maxBytes();
    const bool offloading = config.limits.offload_admission_bytes > 0;
    const size_t pool_part = offloading ? own / 4 * 3 : own / 64;
    const size_t bytes = role == AdmitterRole::pool ? pool_part / std::max<size_t>(1, admission_threads)
                                                    : (own - pool_part) / std::max<size_t>(1, config.threads);
    return std::make_unique<admission::Admitter>(
        model.tokenizer, model.chat_template, unixNow,
        admission::TokenCounterLimits{.cache_bytes = bytes, .shared_segments = shared_segments});
}

}  // namespace dpgate::gateway
