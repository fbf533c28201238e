#include "common/fast_paths.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>

namespace dpgate {

namespace {

constexpr std::array<std::string_view, kFastPathCount> kNames = {
    "json_string_stop_sse2", "simdjson_structurals",  "deepseek_v3_splitter_fast_path",
    "bpe_rank_sweep",        "bpe_char_premerge",     "bpe_linear_merge",
    "utf8_ascii_runs",       "deepseek_v3_fast_path", "http_grammar_sse2",
    "drain_aware_read",      "accepted_socket",       "write_now",
    "uncancellable_io",      "cycle_clock",           "heap_pages",
    "stream_usage_sse2",     "written_usage",
};
static_assert(kFastPathCount == static_cast<std::size_t>(FastPath::written_usage) + 1);
static_assert(kFastPathCount <= 32, "PlainSwitches::off holds a bit per fast path");

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

}  // namespace

std::span<const std::string_view> fastPathNames() noexcept { return kNames; }

std::string_view fastPathName(FastPath path) noexcept { return kNames[static_cast<std::size_t>(path)]; }

PlainSwitches parsePlainSwitches(std::string_view value) {
    PlainSwitches out;
    value = trimmed(value);
    if (value.empty() || value == "0") return out;
    if (value == "1") {
        out.off = (std::uint32_t{1} << kFastPathCount) - 1;
        return out;
    }
    std::string unknown;
    while (true) {
        const std::size_t comma = value.find(',');
        const std::string_view name = trimmed(value.substr(0, comma));
        std::size_t i = 0;
        while (i < kNames.size() && kNames[i] != name) ++i;
        if (i < kNames.size()) {
            out.off |= std::uint32_t{1} << i;
        } else {
            if (!unknown.empty()) unknown += ", ";
            unknown += '"';
            unknown += name;
            unknown += '"';
        }
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    if (!unknown.empty()) {
        out.error = "DPGATE_PLAIN: unknown fast path " + unknown +
                    "; expected 1 (every fast path off) or a comma-separated list of:";
        for (std::size_t i = 0; i < kNames.size(); ++i) {
            out.error += i == 0 ? " " : ", ";
            out.error += kNames[i];
        }
    }
    return out;
}

std::string fastPathsOffText() {
    std::string text;
    for (std::size_t i = 0; i < kNames.size(); ++i) {
        if (fastPathOn(static_cast<FastPath>(i))) continue;
        if (!text.empty()) text += ", ";
        text += kNames[i];
    }
    return text;
}

std::uint32_t fast_paths_detail::offFromEnvironment() noexcept {
    const char* value = std::getenv("DPGATE_PLAIN");
    if (value == nullptr) return 0;
    PlainSwitches switches = parsePlainSwitches(value);
    if (!switches.error.empty()) {
        std::fprintf(stderr, "%s\n", switches.error.c_str());
        std::fflush(stderr);
        std::_Exit(2);
    }
    return switches.off;
}

std::uint32_t fast_paths_detail::off_bits = 0;

namespace {

// Read while the program starts, so an unknown name stops it before it
// does anything, not at the first request that meets a fast path; and
// first of all static initializers (priority 101), so that one that asks
// fastPathOn() sees the process's value.
struct ReadAtStart {
    ReadAtStart() { fast_paths_detail::off_bits = fast_paths_detail::offFromEnvironment(); }
};
[[maybe_unused]] ReadAtStart read_at_start __attribute__((init_priority(101)));

}  // namespace

}  // namespace dpgate
