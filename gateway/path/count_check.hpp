// Count verification: dpgate refuses over-window requests with its own count
// of the prompt (admission/), which is only right when it renders and
// tokenizes as the backend does. Every answer whose prompt dpgate counted
// exactly is compared with the backend's usage.prompt_tokens; a difference
// means the template or tokenizer is not the server's, and then so is every
// window refusal. Always on: the comparison is two integers per answer.
//
// What an operator sees: dpgate_count_checks_total{backend} (comparisons
// made) and dpgate_count_mismatches_total{backend}, a warning line (at most
// one a minute for the whole process, naming how many it left out),
// `count_mismatch` in the access record, and the last mismatch in
// GET /admin/status.
#pragma once

#include "conf/config.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/path/access_log.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::gateway {

class CountCheck {
public:
    static constexpr std::chrono::seconds kLogInterval{60};

    // Both families get a child per configured backend (indexed as in
    // config.backends), so each reads 0 before the first answer.
    CountCheck(metrics::GatewayMetrics& metrics, const std::vector<conf::BackendConfig>& backends);

    // One answer: dpgate's exact count against the backend's usage. Returns
    // the mismatch when they differ (for the access record), else nullopt.
    // Thread-safe; a mismatch takes a lock, an agreement does not.
    std::optional<AccessRecord::CountMismatch> compare(size_t backend, uint32_t rank, std::string_view request_id,
                                                       uint64_t dpgate_prompt_tokens, uint64_t backend_prompt_tokens);

    // The last mismatch (backend, rank, request_id, both counts, UTC time),
    // or null when there was none since start.
    nlohmann::json lastMismatch() const;

private:
    struct Mismatch {
        std::string backend;
        uint32_t rank = 0;
        std::string request_id;
        uint64_t dpgate_prompt_tokens = 0;
        uint64_t backend_prompt_tokens = 0;
        std::chrono::system_clock::time_point time;
    };

    std::vector<std::string> names_;
    std::vector<metrics::Counter*> checks_;
    std::vector<metrics::Counter*> mismatches_;
    mutable std::mutex mutex_;
    std::optional<Mismatch> last_;
    std::optional<std::chrono::steady_clock::time_point> last_logged_;
    uint64_t unlogged_ = 0;  // mismatches since the last warning line that it did not name
};

}  // namespace dpgate::gateway
