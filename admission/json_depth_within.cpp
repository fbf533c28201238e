#include "admission/json_depth_within.hpp"

#include <array>

namespace dpgate::admission {

namespace {

// +1 for '{' and '[', -1 for '}' and ']'.
constexpr std::array<std::int8_t, 256> kDepthChange = [] {
    std::array<std::int8_t, 256> change{};
    change['{'] = change['['] = 1;
    change['}'] = change[']'] = -1;
    return change;
}();

}  // namespace

bool jsonDepthWithin(std::string_view text, std::span<const std::uint32_t> structurals, std::uint32_t max_depth) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    std::int64_t depth = 0;
    std::int64_t deepest = 0;
    for (const std::uint32_t offset : structurals) {
        depth += kDepthChange[bytes[offset]];
        deepest = depth > deepest ? depth : deepest;
    }
    // Unbalanced brackets are the readers' to refuse; only the depth is ours.
    return deepest <= static_cast<std::int64_t>(max_depth);
}

}  // namespace dpgate::admission
