#include "gateway/metrics/gateway_metrics.hpp"

namespace dpgate::metrics {

const std::vector<double>& GatewayMetrics::requestDurationBuckets() {
    static const std::vector<double> b{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,  1,    2.5, 5,
                                       10,    30,   60,    120,  300, 600,  1200, 1800, 3600};
    return b;
}

const std::vector<double>& GatewayMetrics::timeToFirstByteBuckets() {
    static const std::vector<double> b{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,  5,
                                       10,   20,    30,   60,  120,  300, 600, 1200, 1800};
    return b;
}

const std::vector<double>& GatewayMetrics::admissionBuckets() {
    // Admission tokenizes the prompt: microseconds for a chat turn, up to
    // seconds for a 1M-token document.
    static const std::vector<double> b{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                       0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5};
    return b;
}

GatewayMetrics::GatewayMetrics()
    : requests(registry.counter("dpgate_requests_total", "Requests answered, by endpoint and HTTP status code.",
                                {"endpoint", "code"})),
      request_duration_seconds(registry
                                   .histogram("dpgate_request_duration_seconds",
                                              "Time from request received to last response byte sent.",
                                              requestDurationBuckets())
                                   .with({})),
      time_to_first_byte_seconds(registry
                                     .histogram("dpgate_time_to_first_byte_seconds",
                                                "Time from request received to first response byte from upstream.",
                                                timeToFirstByteBuckets())
                                     .with({})),
      admission_rejections(registry.counter("dpgate_admission_rejections_total",
                                            "Requests refused before forwarding, by reason.", {"reason"})),
      admission_seconds(registry
                            .histogram("dpgate_admission_seconds",
                                       "Time spent in admission (parsing, token counting, limits).", admissionBuckets())
                            .with({})),
      prompt_tokens(registry.counter("dpgate_prompt_tokens_total",
                                     "Prompt tokens reported by upstream usage, per backend and DP rank.",
                                     {"backend", "rank"})),
      cached_prompt_tokens(registry.counter(
          "dpgate_cached_prompt_tokens_total",
          "Prompt tokens served from the prefix cache (usage.prompt_tokens_details.cached_tokens), per backend and DP "
          "rank.",
          {"backend", "rank"})),
      completion_tokens(registry.counter("dpgate_completion_tokens_total",
                                         "Completion tokens reported by upstream usage, per backend and DP rank.",
                                         {"backend", "rank"})),
      inflight_requests(registry.gauge("dpgate_inflight_requests",
                                       "Requests currently forwarded to each backend and DP rank.",
                                       {"backend", "rank"})),
      backend_up(registry.gauge(
          "dpgate_backend_up",
          "1 if the backend passes health checks, 0 if it fails them, no sample before the first probe's "
          "verdict; role is primary or standby.",
          {"backend", "role"})),
      upstream_retries(
          registry
              .counter("dpgate_upstream_retries_total", "Requests retried on another slot before any byte was sent.")
              .with({})),
      internal_errors(registry
                          .counter("dpgate_internal_errors_total",
                                   "Requests that failed inside dpgate (a bug): answered 500, or cut when the answer "
                                   "had begun. Each is logged with its request id.")
                          .with({})),
      flips(registry.counter("dpgate_flips_total", "Primary/standby flips performed.").with({})),
      forced_flips(registry
                       .counter("dpgate_forced_flips_total",
                                "Flips made with \"force\": true, without a matching acceptance record (also counted "
                                "in dpgate_flips_total).")
                       .with({})),
      unaccepted_failover(registry
                              .gauge("dpgate_unaccepted_failover",
                                     "1 while the primary is down and a standby without a passing acceptance record "
                                     "matching what it reports takes (or, under routing.failover_requires_acceptance, "
                                     "is refused) its traffic.")
                              .with({})),
      public_window_tokens(
          registry.gauge("dpgate_public_window_tokens", "Context window advertised to clients, in tokens.").with({})),
      admission_queued(registry
                           .gauge("dpgate_admission_queued",
                                  "Requests waiting for an admission thread (large bodies), all keys together.")
                           .with({})),
      admission_deferred(registry
                             .counter("dpgate_admission_deferred_total",
                                      "Requests under limits.offload_admission_bytes whose chat template made more "
                                      "of them than such a body makes (a prompt or render work beyond the bound "
                                      "of a worker thread): judged in the admission pool instead.")
                             .with({})),
      stream_aborts(registry.counter("dpgate_stream_aborts_total",
                                     "Streams cut before completion, by the side that went away (client or upstream).",
                                     {"side"})),
      // gateway/path/count_check.hpp: dpgate's exact prompt count against the backend's usage.
      count_checks(registry.counter("dpgate_count_checks_total",
                                    "Answers whose usage.prompt_tokens was compared with dpgate's own exact count "
                                    "(chat requests without images), per backend.",
                                    {"backend"})),
      count_mismatches(registry.counter(
          "dpgate_count_mismatches_total",
          "Compared answers whose usage.prompt_tokens differed from dpgate's count: the backend's chat template or "
          "tokenizer is not dpgate's, so its window refusals are wrong. Per backend.",
          {"backend"})),
      open_connections(registry.gauge("dpgate_open_connections", "Client connections open now.").with({})),
      buffered_body_bytes(registry
                              .gauge("dpgate_buffered_body_bytes",
                                     "Bytes of request bodies held in memory now, against "
                                     "limits.max_buffered_body_bytes (beyond it: 503).")
                              .with({})),
      connections_refused(registry.counter("dpgate_connections_refused_total",
                                           "Client connections closed as soon as accepted: per_ip (the address "
                                           "had limits.max_connections_per_ip open) or max_connections (at the "
                                           "limit with no idle connection to close).",
                                           {"reason"})),
      idle_connections_evicted(registry
                                   .counter("dpgate_idle_connections_evicted_total",
                                            "Idle client connections (waiting for a request, or lingering) "
                                            "closed at limits.max_connections to make room for a new one, "
                                            "oldest first.")
                                   .with({})),
      backend_usage_invalid(registry.counter(
          "dpgate_backend_usage_invalid_total",
          "Answers whose usage dpgate ignored as implausible (a count that is not a whole number from 0, over the "
          "window times the request's sequences, or cached_tokens over prompt_tokens): not in the token counters, "
          "routing or count checks. The answer is relayed unchanged. Per backend.",
          {"backend"})),
      upstream_dropped(registry.counter(
          "dpgate_upstream_connections_dropped_total",
          "Keep-alive connections to a backend closed instead of reused because the backend sent more than its "
          "answer: bytes after it (reason=bytes_after_answer), bytes while the connection sat idle "
          "(bytes_while_idle), or a close while it sat idle (closed_while_idle). Per backend.",
          {"backend", "reason"})),
      // gateway/control/: the roles shared through etcd (control.etcd).
      control_store_up(registry
                           .gauge("dpgate_control_store_up",
                                  "1 while etcd (control.etcd) answers, 0 while it does not: traffic goes on with the "
                                  "roles last applied, flips and drains are refused. 1 without control.etcd.")
                           .with({})),
      control_revision(registry
                           .gauge("dpgate_control_revision",
                                  "The etcd revision whose roles this replica applies (0 without control.etcd).")
                           .with({})),
      control_resyncs(registry
                          .counter("dpgate_control_resyncs_total",
                                   "Fresh reads of the whole shared state after a lost or compacted etcd watch.")
                          .with({})),
      // gateway/budget/: every key's budgets and usage.
      key_tokens(registry.counter(
          "dpgate_key_tokens_total",
          "Tokens per client key, from the backends' usage: kind=prompt (cached included), cached, completion; "
          "kind=reserved_unused: what was reserved at admission (prompt + 1,024 per image + the output budget "
          "times n) and given back when the answer ended.",
          {"key", "kind"})),
      key_requests(registry.counter("dpgate_key_requests_total",
                                    "Answers per client key, by the HTTP status written (client_closed: none).",
                                    {"key", "status"})),
      key_rate_limited(registry.counter(
          "dpgate_key_rate_limited_total",
          "Requests refused for a key's limit: max_concurrent, requests_per_min, requests_per_day, tokens_per_min, "
          "tokens_per_day (429), never_fits (400: larger than a whole window), store_unavailable (503, "
          "limits.on_store_unavailable: deny).",
          {"key", "limit"})),
      budget_store_up(registry
                          .gauge("dpgate_budget_store_up",
                                 "1 while Redis (limits.redis) decides the budgets, 0 while it cannot be reached and "
                                 "limits.on_store_unavailable applies. 1 without limits.redis.")
                          .with({})),
      budget_local_decisions(registry
                                 .counter("dpgate_budget_local_decisions_total",
                                          "Reservations of budgeted keys decided by this replica alone (its share) "
                                          "or refused (deny) because Redis could not be reached.")
                                 .with({})) {}

}  // namespace dpgate::metrics
