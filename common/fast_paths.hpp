// The switch for dpgate's fast paths (STYLE.md, "Fast paths"): each is a
// hand-written faster version of something with a plain twin in the file
// beside it, and gives the same results. The environment variable
// DPGATE_PLAIN turns them off, read once per process:
//   DPGATE_PLAIN=1            every fast path off (CI runs the tests so too)
//   DPGATE_PLAIN=name,name    the named ones off (names: fastPathName())
//   unset, empty or 0         every fast path on
// An unknown name ends the process at start with status 2 and a message
// listing the valid names. docs/operations.md has the table of fast paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dpgate {

// Each named as the file that holds it (docs/operations.md has the table).
enum class FastPath : std::uint8_t {
    json_string_stop_sse2,           // admission/json_string_stop_sse2.cpp
    simdjson_structurals,            // admission/simdjson_structurals.cpp
    deepseek_v3_splitter_fast_path,  // admission/tokenizer/deepseek_v3_splitter_fast_path.hpp
    bpe_rank_sweep,                  // admission/tokenizer/bpe_rank_sweep.cpp
    bpe_char_premerge,               // admission/tokenizer/bpe_char_premerge.cpp
    bpe_linear_merge,                // admission/tokenizer/bpe_linear_merge.cpp
    utf8_ascii_runs,                 // admission/tokenizer/utf8_ascii_runs.hpp
    deepseek_v3_fast_path,           // admission/template/deepseek_v3_fast_path.cpp
    http_grammar_sse2,               // gateway/http/http_grammar_sse2.hpp
    drain_aware_read,                // gateway/net/drain_aware_read.hpp
    accepted_socket,                 // gateway/net/accepted_socket.hpp
    write_now,                       // gateway/net/write_now.hpp
    uncancellable_io,                // gateway/platform/uncancellable_io.hpp
    cycle_clock,                     // gateway/platform/cycle_clock.hpp
    heap_pages,                      // gateway/platform/heap_pages.cpp
    stream_usage_sse2,               // gateway/usage/stream_usage_sse2.hpp
    written_usage,                   // gateway/usage/written_usage.cpp
};
inline constexpr std::size_t kFastPathCount = 17;

// The names DPGATE_PLAIN takes, in FastPath order.
std::span<const std::string_view> fastPathNames() noexcept;
std::string_view fastPathName(FastPath path) noexcept;

// What a DPGATE_PLAIN value turns off: bit i for FastPath i. `error` is set
// (naming the unknown names and listing the valid ones) when a name is unknown.
struct PlainSwitches {
    std::uint32_t off = 0;
    std::string error;
};
PlainSwitches parsePlainSwitches(std::string_view value);

// "json_string_stop_sse2, write_now" for the fast paths this process runs
// without; "" when every one is on.
std::string fastPathsOffText();

namespace fast_paths_detail {
// DPGATE_PLAIN parsed; on an unknown name prints the error and exits with 2.
std::uint32_t offFromEnvironment() noexcept;
// Bit i set: FastPath i is off. Set from DPGATE_PLAIN while the program
// starts, before any static initializer of default priority runs
// (fast_paths.cpp), and never written again.
extern std::uint32_t off_bits;
}  // namespace fast_paths_detail

// Whether `path` is on in this process: a load and a bit test, no guard,
// so that a call per header field or per stream line costs next to nothing.
inline bool fastPathOn(FastPath path) noexcept {
    return ((fast_paths_detail::off_bits >> static_cast<unsigned>(path)) & 1u) == 0;
}

}  // namespace dpgate
