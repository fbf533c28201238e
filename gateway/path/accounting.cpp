#include "gateway/path/accounting.hpp"

#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/path/budget_gate.hpp"
#include "gateway/path/count_check.hpp"
#include "gateway/path/path_parts.hpp"
#include "gateway/platform/cycle_clock.hpp"

#include <chrono>

namespace dpgate::gateway {

void accountAnswer(RequestContext& c, SlotLease& lease, const admission::Admitted& admitted) {
    if (!c.record.usage) return;
    const Usage& usage = *c.record.usage;
    if (admitted.expected_usage_prompt_tokens)
        c.record.count_mismatch =
            c.shared.count_check.compare(lease.backend(), lease.rank(), c.record.request_id,
                                         *admitted.expected_usage_prompt_tokens, usage.prompt_tokens);
    lease.answered(usage);
    if (c.metrics) {
        PathLocal::SlotMetrics& slot = c.local.slotMetrics(lease.backend(), lease.rank());
        slot.prompt_tokens->inc(usage.prompt_tokens);
        slot.cached_prompt_tokens->inc(usage.cached_prompt_tokens);
        slot.completion_tokens->inc(usage.completion_tokens);
    }
}

RequestOutcome::~RequestOutcome() {
    settleBudget(c_);
    if (!c_.metrics) return;
    metrics::GatewayMetrics& m = *c_.metrics;
    const AccessRecord& r = c_.record;
    c_.local.requestCounter(r.path, r.status).inc();
    m.request_duration_seconds.observe(std::chrono::duration<double>(CycleClock::now() - r.started).count());
    if (r.ttfb_seconds >= 0) m.time_to_first_byte_seconds.observe(r.ttfb_seconds);
    if (r.retries > 0) m.upstream_retries.inc(r.retries);
    if (r.stream_abort) m.stream_aborts.with({r.stream_abort}).inc();
}

}  // namespace dpgate::gateway
