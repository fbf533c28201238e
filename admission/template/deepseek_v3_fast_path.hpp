#pragma once
// A native rendering of DeepSeek V3's chat template (the `chat_template` of
// its tokenizer_config.json), used instead of the Jinja engine when the
// loaded template is exactly that one. Why: every request is rendered and
// counted (count verification), and the engine spends ~9,000 instructions on
// a two-message request where this spends a few hundred; the proxy benchmark
// measures that per request.
//
// Proven, not trusted: the template is recognised by its fingerprint (its
// exact text), the fast path declines anything it does not model (the
// `openai` content format, continue_final_message, template kwargs that
// name one of the template's variables), and the golden suite and the fuzz
// target render every DeepSeek V3 case both ways and require identical text.
// DPGATE_PLAIN=deepseek_v3_fast_path (common/fast_paths.hpp) turns it off.
//
// Under vLLM's string content format the template sees every content as a
// string (null is ""), so its tool-call branch (`content is none`) never
// runs: assistant tool calls add nothing to the prompt.
#include <string>
#include <string_view>

#include "admission/template/chat_request.hpp"

namespace dpgate::admission {

// Whether `source` is, byte for byte, DeepSeek V3's chat template.
bool isDeepSeekV3Template(std::string_view source);

// Appends what the template renders for `request` (string content format,
// `bos_token` = `bos`). The caller has checked the conditions above.
void renderDeepSeekV3(const ChatRequest& request, std::string_view bos, std::string& out);

}  // namespace dpgate::admission
