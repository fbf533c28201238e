#pragma once
// A chat request rendered to the prompt text the backend tokenizes: vLLM's
// preprocessing of the request into template variables, then the model's
// chat template (docs/VLLM_RENDERING.md, sections 3-4).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "admission/template/chat_request.hpp"
#include "admission/template/chat_template.hpp"
#include "admission/template/jinja/arena.hpp"
#include "admission/template/jinja/render.hpp"
#include "common/fast_paths.hpp"

namespace dpgate::admission {

struct PromptRenderOptions {
    std::int64_t now_unix_seconds = 0;  // strftime_now()
    jinja::RenderLimits limits;
    // Render DeepSeek V3's own template natively where the fast path models
    // the request (deepseek_v3_fast_path.hpp); false: always the engine, its
    // plain twin (the tests that prove the two identical, DPGATE_PLAIN).
    bool fast_path = fastPathOn(FastPath::deepseek_v3_fast_path);
};

struct PromptRenderError {
    std::string param;    // the request field to blame ("messages", "chat_template_kwargs", ...)
    std::string message;  // the template's own message for raise_exception and template errors
    bool limit = false;   // dpgate's work bound stopped the render
};

// The renderers of the templates one caller (an Admitter) renders with,
// kept between requests so that a warm render allocates nothing.
class PromptRenderers {
public:
    jinja::Renderer& get(const jinja::Template& tpl, jinja::Arena& arena);

private:
    struct Entry {
        const jinja::Template* tpl;
        const jinja::Arena* arena;
        std::unique_ptr<jinja::Renderer> renderer;
    };
    std::vector<Entry> entries_;
};

// Appends the prompt to `prompt`. Values are built in `arena`, which the
// caller resets between requests. `renderers` (may be null) keeps the
// interpreter's buffers between calls.
std::optional<PromptRenderError> renderChatPrompt(const ChatTemplate& chat_template, const ChatRequest& request,
                                                  jinja::Arena& arena, std::string& prompt,
                                                  const PromptRenderOptions& options,
                                                  PromptRenderers* renderers = nullptr);

// The `messages` variable vLLM builds from the request, for a content format.
jinja::Value conversationValue(const ChatRequest& request, ContentFormat format, jinja::Arena& arena);

}  // namespace dpgate::admission
