#include "admission/template/chat_encoder.hpp"

#include "admission/template/deepseek_v3_encoder.hpp"

namespace dpgate::admission {

PromptCount ChatEncoder::count(const ChatRequest& request, TokenCounter& counter) const {
  PromptCount result;
  for (const ChatMessage& message : request.messages) result.images += message.images;
  // Reused across calls on this thread: a long conversation's prompt is
  // rendered every turn and should not reallocate megabytes each time.
  thread_local std::string prompt;
  prompt.clear();
  if (auto error = render(request, prompt)) {
    result.error = std::move(*error);
    return result;
  }
  const TokenCount tokens = counter.count(prompt);
  if (!tokens.ok) {
    result.error = tokens.error;
    return result;
  }
  result.ok = true;
  result.prompt_tokens = tokens.tokens;
  return result;
}

std::unique_ptr<ChatEncoder> makeChatEncoder(std::string_view template_name, std::string& error) {
  if (template_name == "deepseek-v3") return std::make_unique<DeepSeekV3Encoder>();
  error = "unknown chat template \"" + std::string(template_name) + "\" (known: deepseek-v3)";
  return nullptr;
}

}  // namespace dpgate::admission
