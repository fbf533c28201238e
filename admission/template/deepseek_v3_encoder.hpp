#pragma once
// The DeepSeek V3 chat template (`chat_template` of the model's
// tokenizer_config.json), quirks included:
//   - every system (and developer) message, wherever it appears, is joined
//     with "\n\n" into one system prompt right after BOS;
//   - the first tool call of the whole conversation opens with
//     <｜Assistant｜><｜tool▁calls▁begin｜> and is never closed; every later
//     call, in any later message, is prefixed "\n" and followed by
//     <｜tool▁calls▁end｜><｜end▁of▁sentence｜> (the template's ns.is_first);
//   - an assistant message with content (even "") ignores its tool_calls;
//   - only the first tool output of the conversation opens
//     <｜tool▁outputs▁begin｜>; later ones start with "\n"; the group is
//     closed only by an assistant message with content or the end of the
//     conversation, and no generation prompt follows a trailing tool output.
#include "admission/template/chat_encoder.hpp"

namespace dpgate::admission {

class DeepSeekV3Encoder final : public ChatEncoder {
 public:
  std::string_view name() const override { return "deepseek-v3"; }
  std::optional<std::string> checkTokenizer(const Tokenizer& tokenizer) const override;
  std::optional<std::string> render(const ChatRequest& request, std::string& prompt) const override;
};

}  // namespace dpgate::admission
