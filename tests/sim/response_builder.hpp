#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "prompt_digest.hpp"

namespace dpgate::sim {

struct Usage {
    std::uint64_t prompt_tokens = 0;
    std::uint64_t completion_tokens = 0;
    std::uint64_t cached_tokens = 0;
    bool details = true;  // false: no prompt_tokens_details (vLLM without --enable-prompt-tokens-details)
};

// vLLM's error body: {"object":"error","message":...,"type":...,"param":null,"code":N}.
std::string errorJson(std::string_view message, std::string_view type, int code);

// The deterministic answer text: token `index` is one word picked by a hash
// of the prompt, with a leading space after the first.
std::string generatedPiece(std::uint64_t seed, std::uint64_t index);

// Builds the response bodies and SSE events of one answer, in vLLM's shapes.
class ResponseBuilder {
public:
    ResponseBuilder(ApiKind kind, std::string id, std::int64_t created, std::string_view model, bool stream);

    std::string chatCompletion(std::string_view text, std::string_view finish_reason, const Usage& usage) const;
    std::string chatToolCall(std::string_view call_id, std::string_view name, const Usage& usage) const;
    std::string textCompletion(std::string_view text, std::string_view finish_reason, const Usage& usage) const;

    // Streaming events, each a complete "data: {...}\n\n". An empty
    // finish_reason is sent as null.
    std::string chatRoleEvent() const;
    std::string chatContentEvent(std::string_view piece, std::string_view finish_reason) const;
    std::string chatToolCallStartEvent(std::string_view call_id, std::string_view name) const;
    std::string chatToolCallArgumentsEvent(std::string_view arguments) const;
    std::string textEvent(std::string_view piece, std::string_view finish_reason) const;
    std::string usageEvent(const Usage& usage) const;
    static constexpr std::string_view kDoneEvent = "data: [DONE]\n\n";

private:
    std::string head_;  // {"id":...,"object":...,"created":...,"model":...
};

}  // namespace dpgate::sim
