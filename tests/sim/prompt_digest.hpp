#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::sim {

enum class ApiKind { kChat, kCompletion };

// What the simulator needs from a /v1/chat/completions or /v1/completions body.
struct PromptDigest {
    std::uint64_t prompt_tokens = 0;          // pseudo-tokens, see PromptHasher
    std::vector<std::uint64_t> block_hashes;  // chained, one per full block
    std::uint64_t text_seed = 0;              // seeds the deterministic answer
    std::optional<std::uint64_t> max_tokens;  // max_completion_tokens or max_tokens
    bool stream = false;
    bool include_usage = false;                 // stream_options.include_usage
    std::optional<std::string> tool_call_name;  // answer with a call to this tool
};

// Canonical prompt text, in this order:
//   chat:        minified `tools` JSON (if any), then for each message
//                role + "\n" + its text parts concatenated (+ minified
//                `tool_calls` JSON of assistant messages); image parts
//                (`image_url`, `input_image`) count 1024 tokens each, in place;
//   completions: the prompt string, or each string of a prompt list (a token
//                id list counts one token per id).
// Returns false with a vLLM-style message in `error` for malformed JSON or
// wrong field types.
bool digestRequest(std::string_view body, ApiKind kind, PromptDigest& digest, std::string& error);

}  // namespace dpgate::sim
