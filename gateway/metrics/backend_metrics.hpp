// Reads a backend's own Prometheus text page (vLLM's GET /metrics, format
// 0.0.4) into one row per data-parallel rank, for /admin/status's "all 8
// ranks at a glance" table. The page comes from a backend over the network,
// so it is untrusted bytes: parsing never throws, runs in time linear in the
// input, skips (and counts) lines it cannot read, and keeps at most one row
// per rank in [0, kMaxBackendRank].
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace dpgate::metrics {

// Same bound as conf's backends[].dp_ranks (1..1024).
inline constexpr int kMaxBackendRank = 1023;

// One DP rank's view. A field is absent when the page did not carry its
// metric for this rank, or carried only NaN, infinite or negative values.
struct BackendRankRow {
    int rank = 0;                                // the sample's engine="N" label; none means 0
    std::optional<double> running;               // vllm:num_requests_running
    std::optional<double> waiting;               // vllm:num_requests_waiting
    std::optional<double> kv_cache_usage;        // vllm:kv_cache_usage_perc (or gpu_cache_usage_perc), 1 = full
    std::optional<double> prefix_cache_queries;  // tokens looked up in the prefix cache (counter)
    std::optional<double> prefix_cache_hits;     // of those, tokens found (counter)
    // hits / queries since the backend started; absent when queries is 0 or
    // either counter is missing (or hits > queries). Falls back to vLLM v0's
    // vllm:gpu_prefix_cache_hit_rate gauge when the counters are absent.
    std::optional<double> prefix_cache_hit_ratio;
    std::optional<double> prompt_tokens;      // vllm:prompt_tokens_total
    std::optional<double> generation_tokens;  // vllm:generation_tokens_total
    std::optional<double> preemptions;        // vllm:num_preemptions_total

    bool operator==(const BackendRankRow&) const = default;
};

struct BackendRankTable {
    // Ascending rank; one per rank that had a sample of a recognised metric.
    std::vector<BackendRankRow> rows;
    // Lines that are not blank, not comments and not a valid sample, plus
    // recognised samples whose engine label is not a rank in [0, kMaxBackendRank].
    size_t parse_errors = 0;
    size_t samples_used = 0;  // samples that fed a field above

    const BackendRankRow* find(int rank) const;
    bool operator==(const BackendRankTable&) const = default;
};

// Recognised names (several per field: vLLM renamed them across versions;
// when a page carries two names for one field, the newest wins):
//   running      vllm:num_requests_running
//   waiting      vllm:num_requests_waiting
//   kv usage     vllm:kv_cache_usage_perc > vllm:gpu_cache_usage_perc
//   queries      vllm:prefix_cache_queries[_total] > vllm:gpu_prefix_cache_queries[_total]
//   hits         vllm:prefix_cache_hits[_total] > vllm:gpu_prefix_cache_hits[_total]
//   prompt       vllm:prompt_tokens[_total]
//   generation   vllm:generation_tokens[_total]
//   preemptions  vllm:num_preemptions[_total]
// Several series of one name for one rank (e.g. two model_name values) add
// up; for kv usage the largest wins. Other metrics are read and ignored.
BackendRankTable parseBackendMetrics(std::string_view text);

// The table as JSON for /admin/status:
// {"ranks":[{"rank":0,"running":1,"waiting":0,"prefix_cache_hit_ratio":0.5,...}],
//  "parse_errors":0}; absent fields are null.
nlohmann::json backendRankTableJson(const BackendRankTable& table);

}  // namespace dpgate::metrics
