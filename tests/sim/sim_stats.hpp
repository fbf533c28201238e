#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dpgate::sim {

// Per-rank numbers behind vLLM's /metrics.
struct RankCounters {
    std::atomic<std::int64_t> running{0};  // in flight, whether queued, prefilling or decoding
    // Of those, not yet given a prefill token (--serial-prefill), and the
    // prompt tokens the rank still has to prefill.
    std::atomic<std::int64_t> waiting{0};
    std::atomic<std::uint64_t> queued_prefill_tokens{0};
    std::atomic<std::uint64_t> served{0};
    std::atomic<std::uint64_t> prompt_tokens{0};
    std::atomic<std::uint64_t> generation_tokens{0};
    std::atomic<std::uint64_t> cache_query_tokens{0};
    std::atomic<std::uint64_t> cache_hit_tokens{0};
};

// What tests read back through GET /sim/stats and GET /metrics.
class SimStats {
public:
    explicit SimStats(int dp_ranks);

    RankCounters& rank(int index) { return ranks_[static_cast<std::size_t>(index)]; }

    std::atomic<std::uint64_t> requests{0};   // completion requests received
    std::atomic<std::uint64_t> cancelled{0};  // client went away before the end
    std::atomic<std::int64_t> in_flight{0};

    // Remembers the headers and a SHA-256 of the body of the latest API
    // request, so tests can check what a gateway forwarded.
    void recordRequest(std::string_view method, std::string_view target,
                       std::vector<std::pair<std::string, std::string>> headers, std::string_view body);
    std::string statsJson() const;
    std::string metricsText(std::string_view model) const;
    void reset();

private:
    int dp_ranks_;
    std::unique_ptr<RankCounters[]> ranks_;
    mutable std::mutex last_mutex_;
    std::string last_method_;
    std::string last_target_;
    std::vector<std::pair<std::string, std::string>> last_headers_;
    std::string last_body_sha256_;
    std::uint64_t last_body_bytes_ = 0;
};

}  // namespace dpgate::sim
