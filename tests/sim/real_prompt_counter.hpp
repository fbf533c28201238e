#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace dpgate::admission {
class Admitter;
class TokenCounter;
}  // namespace dpgate::admission

namespace dpgate::sim {

// Counts prompt tokens as a real server does, with dpgate's own admission
// library (--tokenizer): the chat template rendered and tokenized for chat
// bodies, the prompt strings tokenized for completions bodies. The only
// place the simulator touches admission/, so a change of that library's API
// is a change of this file alone.
//
// Thread-safe (one lock around the counter, whose caches are not): the
// simulator is a test tool, not a benchmark of this path.
class RealPromptCounter {
public:
    // `tokenizer_path`: a tokenizer.json or the folder holding it.
    // `chat_template_path`: a Jinja chat template as vLLM's --chat-template
    // takes it; empty for the chat_template of the tokenizer_config.json
    // beside the tokenizer.
    // Null with `error` set when either cannot be used.
    static std::unique_ptr<RealPromptCounter> load(const std::string& tokenizer_path,
                                                   const std::string& chat_template_path, std::string& error);
    ~RealPromptCounter();

    // Prompt tokens of a /v1/chat/completions body, as vLLM reports them in
    // usage.prompt_tokens; nullopt with `error` for a body the template
    // cannot render (the simulator answers 400 with it).
    std::optional<std::uint64_t> count(std::string_view chat_body, std::string& error);

    // Prompt tokens of a /v1/completions body as vLLM sums them over its
    // prompts: each string is its own sequence with the BOS token added, a
    // list of token ids counts its ids.
    std::optional<std::uint64_t> countCompletion(std::string_view completions_body, std::string& error);

private:
    RealPromptCounter() = default;

    std::mutex mutex_;
    std::unique_ptr<admission::Admitter> admitter_;
    std::unique_ptr<admission::TokenCounter> counter_;
};

}  // namespace dpgate::sim
