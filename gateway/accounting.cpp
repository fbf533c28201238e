#include "gateway/accounting.hpp"

#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/server.hpp"
#include "gateway/worker.hpp"

#include <chrono>

namespace dpgate::gateway {

void accountAnswer(RequestContext& c, SlotLease& lease, const admission::Admitted& admitted) {
    if (!c.record.usage) return;
    const metrics::Usage& usage = *c.record.usage;
    if (admitted.expected_usage_prompt_tokens)
        c.record.count_mismatch = c.server.countCheck().compare(lease.backend(), lease.rank(), c.record.request_id,
                                                                *admitted.expected_usage_prompt_tokens,
                                                                usage.prompt_tokens);
    lease.answered(usage);
    if (c.metrics) {
        Worker::SlotMetrics& slot = c.worker.slotMetrics(lease.backend(), lease.rank());
        slot.prompt_tokens->inc(usage.prompt_tokens);
        slot.cached_prompt_tokens->inc(usage.cached_prompt_tokens);
        slot.completion_tokens->inc(usage.completion_tokens);
    }
}

RequestOutcome::~RequestOutcome() {
    if (!c_.metrics) return;
    c_.worker.requestCounter(c_.record.path, c_.record.status).inc();
    c_.metrics->request_duration_seconds.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - c_.record.started).count());
}

}  // namespace dpgate::gateway
