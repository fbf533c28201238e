#pragma once
// What admission enforces, taken from config (model:, limits:) and from the
// gateway's current public window (min of the backends' max_model_len).
#include <cstdint>
#include <string>
#include <vector>

namespace dpgate::admission {

struct AdmissionLimits {
    std::string served_model_id = "ds-v4.1-flash-1017";
    std::vector<std::string> model_aliases;
    std::uint64_t window_tokens = 1048576;
    std::uint64_t max_output_tokens = 32768;    // also the budget inserted when the client sends none
    std::uint64_t image_reserve_tokens = 1024;  // per image part, history included
    std::uint64_t max_images = 640;
    std::uint64_t max_body_bytes = 256ull * 1024 * 1024;
};

}  // namespace dpgate::admission
