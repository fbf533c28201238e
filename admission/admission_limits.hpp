#pragma once
// What admission enforces, taken from config (model:, limits:) and from the
// gateway's current public window (min of the backends' max_model_len).
#include <cstdint>
#include <string>
#include <vector>

namespace dpgate::admission {

// The deepest limits.max_json_depth conf allows; the request readers'
// recursion stops here whatever the limit says.
inline constexpr std::uint32_t kMaxJsonDepthCap = 1000;

struct AdmissionLimits {
    std::string served_model_id = "ds-v4.1-flash-1017";
    std::vector<std::string> model_aliases;
    std::uint64_t window_tokens = 1048576;
    std::uint64_t max_output_tokens = 32768;    // also the budget inserted when the client sends none
    std::uint64_t image_reserve_tokens = 1024;  // per image part, history included
    std::uint64_t max_images = 640;
    std::uint64_t max_body_bytes = 256ull * 1024 * 1024;
    // Arrays and objects nested in each other anywhere in the body, the body
    // itself counting 1 (limits.max_json_depth; at most kMaxJsonDepthCap).
    std::uint32_t max_json_depth = 256;
    std::uint32_t max_n = 8;  // completions per request (limits.max_n)
};

}  // namespace dpgate::admission
