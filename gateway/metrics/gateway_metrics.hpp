// Every metric dpgate exports, declared once. The gateway holds one instance
// and updates through cached children, e.g.
//   auto& prompt = metrics.prompt_tokens.with({backend, rank});  // once per slot
//   prompt.inc(usage.prompt_tokens);                             // per request
// Families without labels are exposed as their single child.
#pragma once

#include "gateway/metrics/registry.hpp"

#include <string>
#include <vector>

namespace dpgate::metrics {

struct GatewayMetrics {
    GatewayMetrics();
    GatewayMetrics(const GatewayMetrics&) = delete;
    GatewayMetrics& operator=(const GatewayMetrics&) = delete;

    std::string render() const { return registry.render(); }

    Registry registry;  // declared first: the references below point into it

    CounterFamily& requests;                // dpgate_requests_total{endpoint,code}
    Histogram& request_duration_seconds;    // dpgate_request_duration_seconds
    Histogram& time_to_first_byte_seconds;  // dpgate_time_to_first_byte_seconds
    CounterFamily& admission_rejections;    // dpgate_admission_rejections_total{reason}
    Histogram& admission_seconds;           // dpgate_admission_seconds
    CounterFamily& prompt_tokens;           // dpgate_prompt_tokens_total{backend,rank}
    CounterFamily& cached_prompt_tokens;    // dpgate_cached_prompt_tokens_total{backend,rank}
    CounterFamily& completion_tokens;       // dpgate_completion_tokens_total{backend,rank}
    GaugeFamily& inflight_requests;         // dpgate_inflight_requests{backend,rank}
    GaugeFamily& backend_up;                // dpgate_backend_up{backend,role}
    Counter& upstream_retries;              // dpgate_upstream_retries_total
    Counter& internal_errors;               // dpgate_internal_errors_total
    Counter& flips;                         // dpgate_flips_total
    Counter& forced_flips;                  // dpgate_forced_flips_total
    Gauge& unaccepted_failover;             // dpgate_unaccepted_failover
    Gauge& public_window_tokens;            // dpgate_public_window_tokens
    Gauge& admission_queued;                // dpgate_admission_queued
    Counter& admission_deferred;            // dpgate_admission_deferred_total
    CounterFamily& stream_aborts;           // dpgate_stream_aborts_total{side}
    CounterFamily& count_checks;            // dpgate_count_checks_total{backend}
    CounterFamily& count_mismatches;        // dpgate_count_mismatches_total{backend}
    Gauge& open_connections;                // dpgate_open_connections
    Gauge& buffered_body_bytes;             // dpgate_buffered_body_bytes
    CounterFamily& connections_refused;     // dpgate_connections_refused_total{reason}
    Counter& idle_connections_evicted;      // dpgate_idle_connections_evicted_total
    CounterFamily& backend_usage_invalid;   // dpgate_backend_usage_invalid_total{backend}
    CounterFamily& upstream_dropped;        // dpgate_upstream_connections_dropped_total{backend,reason}
    Gauge& control_store_up;                // dpgate_control_store_up
    Gauge& control_revision;                // dpgate_control_revision
    Counter& control_resyncs;               // dpgate_control_resyncs_total
    CounterFamily& key_tokens;              // dpgate_key_tokens_total{key,kind}
    CounterFamily& key_requests;            // dpgate_key_requests_total{key,status}
    CounterFamily& key_rate_limited;        // dpgate_key_rate_limited_total{key,limit}
    Gauge& budget_store_up;                 // dpgate_budget_store_up
    Counter& budget_local_decisions;        // dpgate_budget_local_decisions_total

    // Bucket bounds in seconds. TTFB reaches 30 minutes: a 1M-token prefill
    // takes minutes, and queueing behind one can take several more.
    static const std::vector<double>& requestDurationBuckets();
    static const std::vector<double>& timeToFirstByteBuckets();
    static const std::vector<double>& admissionBuckets();
};

}  // namespace dpgate::metrics
