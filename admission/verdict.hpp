#pragma once
// The outcome of admission: forward the request (with what routing and
// metrics need) or answer it with an OpenAI-shaped error.
#include "common/api_error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace dpgate::admission {

struct Admitted {
    std::uint64_t prompt_tokens = 0;  // exact, or the byte-level upper bound when `counted` is false
    bool counted = true;              // false: admitted on the fast path without tokenizing
    // The prompt tokens the backend's usage.prompt_tokens must report, when
    // dpgate knows them exactly: counted, no images (their tokens are only
    // reserved), and one sequence (vLLM's usage sums a completions request's
    // prompts, while prompt_tokens is the longest one's). Unset otherwise.
    std::optional<std::uint64_t> expected_usage_prompt_tokens;
    // The sequences the backend generates: the prompts times n. Its usage
    // sums over them, so no plausible count exceeds the window this many
    // times (gateway/usage/stream_usage.hpp, UsageCheck).
    std::uint64_t sequences = 1;
    std::uint32_t images = 0;
    std::uint64_t output_budget = 0;  // per sequence: what the window check counts, as vLLM's does
    std::uint32_t n = 1;              // completions asked for (`n`, at most limits.max_n)
    // The output tokens the request may make in all: n * output_budget.
    std::uint64_t output_reservation_tokens = 0;
    // True when the client sent no max_tokens / max_completion_tokens: the
    // gateway forwards body[0, splice_offset) + splice_text + body[splice_offset,
    // end), i.e. `"max_tokens":N,` right after the opening brace, everything
    // else byte-identical. Three buffers, so a 128 MB body is never copied.
    // splice_offset is set either way: the gateway splices its own fields
    // (stream_options) at the same place.
    bool inserted_max_tokens = false;
    std::size_t splice_offset = 0;
    std::string splice_text;
    bool stream = false;
    bool include_usage = false;       // stream_options.include_usage
    bool has_stream_options = false;  // the client sent stream_options (even null)
    // Affinity material. `prompt_cache_key` is the body field (empty if absent);
    // `head_hash` is routing::conversationHeadKey of the conversation (the
    // leading system messages and the first other message, or the first
    // completions prompt): an append-only conversation keeps it every turn.
    bool has_prompt_cache_key = false;
    std::string prompt_cache_key;
    std::string user;
    std::uint64_t head_hash = 0;
};

// A refusal is the gateway's one error type (common/api_error.hpp).
using Refused = ApiError;

using Verdict = std::variant<Admitted, Refused>;

// The forwarded body as one string (tests, small bodies).
std::string splicedBody(std::string_view body, const Admitted& admitted);

// {"error":{"code":...,"message":...,"param":...,"type":...}}
inline std::string errorBody(const Refused& refused) { return refused.json(); }

}  // namespace dpgate::admission
