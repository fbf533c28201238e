#include "gateway/path/admit_request.hpp"

#include "gateway/backends/backend_registry.hpp"
#include "gateway/path/admission_pool.hpp"
#include "gateway/path/path_parts.hpp"
#include "gateway/platform/cycle_clock.hpp"

#include <chrono>

namespace dpgate::gateway {

namespace {

admission::Endpoint endpointOf(std::string_view target) {
    return target.substr(0, target.find('?')) == "/v1/completions" ? admission::Endpoint::completions
                                                                   : admission::Endpoint::chat_completions;
}

// What follows a verdict on either thread, back on the worker: a refusal
// without a code of its own is counted and answered as
// invalid_request_error; the time and refusals go to the metrics, what was
// admitted to the access record.
void recordVerdict(RequestContext& c, admission::Verdict& verdict, CycleClock::time_point start) {
    auto* refused = std::get_if<admission::Refused>(&verdict);
    if (refused && refused->code.empty()) refused->code = "invalid_request_error";
    if (c.metrics) {
        c.metrics->admission_seconds.observe(std::chrono::duration<double>(CycleClock::now() - start).count());
        if (refused) c.metrics->admission_rejections.with({refused->code}).inc();
    }
    if (auto* admitted = std::get_if<admission::Admitted>(&verdict)) {
        c.record.stream = admitted->stream;
        c.record.images = admitted->images;
    }
}

}  // namespace

std::optional<admission::Verdict> admitRequest(RequestContext& c) {
    const auto start = CycleClock::now();
    const std::string_view body = c.request.body();
    const size_t capacity = c.request.body().capacity();
    const admission::Endpoint endpoint = endpointOf(c.request.target());
    const admission::AdmissionLimits& limits = c.local.admissionLimits(c.config, c.shared.backends.publicWindow());
    admission::Admitter& admitter = c.local.admitter();
    const uint64_t threshold = c.config.limits.offload_admission_bytes;
    std::optional<admission::Verdict> verdict;
    if (threshold == 0) {
        verdict = admitter.admit(body, capacity, endpoint, limits);  // everything here: the operator's choice
    } else {
        // A small body whose template makes much of it (a long tojson indent,
        // a loop) goes to the pool like a large one: room for what real
        // templates make of a body under the threshold, and no more.
        const admission::Admitter::QuickBound bound{.prompt_bytes = threshold + (16 << 10),
                                                    .render_steps = 50'000 + body.size() / 4};
        verdict = admitter.admitQuickly(body, capacity, endpoint, limits, bound);
        if (!verdict) {
            if (c.metrics) c.metrics->admission_deferred.inc();
            return std::nullopt;
        }
    }
    recordVerdict(c, *verdict, start);
    return verdict;
}

bool admitsOffThread(const RequestContext& c) {
    const uint64_t threshold = c.config.limits.offload_admission_bytes;
    return threshold > 0 && c.request.body().size() >= threshold;
}

awaitable<void> admitOffThread(RequestContext& c, admission::Verdict& verdict) {
    const auto start = CycleClock::now();
    // Copied here: the worker rebuilds its limits when a reload swaps the
    // config, and the admission thread must not read them meanwhile. The
    // body is left alone by the worker until this resumes.
    const admission::AdmissionLimits limits = c.local.admissionLimits(c.config, c.shared.backends.publicWindow());
    const std::string_view body = c.request.body();
    const size_t capacity = c.request.body().capacity();
    const admission::Endpoint endpoint = endpointOf(c.request.target());
    // Requests without a key (auth.required: false) share one queue.
    const std::string_view key = c.key ? std::string_view(c.key->name) : std::string_view();
    verdict = co_await c.shared.admission_pool.judge(
        key, [&](admission::Admitter& admitter) { return admitter.admit(body, capacity, endpoint, limits); });
    recordVerdict(c, verdict, start);
}

}  // namespace dpgate::gateway
