#pragma once
// A model's chat template, implemented natively: renders a ChatRequest to the
// prompt text the backend will tokenize (add_generation_prompt = true) and
// counts it. Chosen by config `model.template`; newer DeepSeek encodings
// (V3.1's thinking flag and tool format, V3.2's DSML tools) are further
// implementations of this interface.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "admission/template/chat_request.hpp"
#include "admission/tokenizer/token_counter.hpp"

namespace dpgate::admission {

struct PromptCount {
  bool ok = false;
  std::uint64_t prompt_tokens = 0;  // tokens of the rendered prompt, special tokens included
  std::uint32_t images = 0;         // image parts, history included
  std::string error;                // set when !ok
};

class ChatEncoder {
 public:
  virtual ~ChatEncoder() = default;

  virtual std::string_view name() const = 0;
  // Checks that the tokenizer knows every special token the template emits.
  virtual std::optional<std::string> checkTokenizer(const Tokenizer& tokenizer) const = 0;
  // Appends the rendered prompt to `prompt`; nullopt on success, else why the
  // request cannot be rendered (unknown role, missing content...).
  virtual std::optional<std::string> render(const ChatRequest& request, std::string& prompt) const = 0;

  // Renders and counts through `counter` (whose segment cache makes the next
  // turn of a conversation cost only its new text).
  PromptCount count(const ChatRequest& request, TokenCounter& counter) const;
};

// Template names: "deepseek-v3". Null with `error` set for an unknown name.
std::unique_ptr<ChatEncoder> makeChatEncoder(std::string_view template_name, std::string& error);

}  // namespace dpgate::admission
