// Fuzz the chat-template engine. The first byte picks the mode:
//   even: the rest is `TEMPLATE \0 CONTEXT_JSON`; the template is parsed and,
//         when it parses, rendered over a fixed conversation plus the context
//         (when it is a JSON object), under tight work bounds;
//   odd:  the rest is a chat completions body, rendered and counted through
//         Qwen3's, Gemma 3's and tests/golden/templates/deepseek_tools.jinja,
//         and through DeepSeek V3's both natively and by the engine, which
//         must agree byte for byte (deepseek_v3_fast_path.hpp).
// Either way: no crash, no unbounded work, and a render that fails leaves
// the output as it was. The render's bounds hold exactly: the arena grows
// by at most RenderLimits::arena_bytes and the output by at most
// output_bytes, whatever the template and the context (deep, wide, huge
// widths and indents). Run it with a small stack (`ulimit -s 1024`): the
// renderer's depth bounds keep it within.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "admission/admit.hpp"
#include "admission/template/jinja/py_json.hpp"
#include "admission/template/jinja/render.hpp"
#include "admission/template/jinja/template.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace {

using namespace dpgate::admission;

std::filesystem::path tokenizerDir() {
    const char* dir = std::getenv("DPGATE_TOKENIZER_DIR");
    return dir != nullptr ? std::filesystem::path(dir)
                          : std::filesystem::path(DPGATE_SOURCE_DIR) / "local/tokenizer/deepseek-v3";
}

struct Admitters {
    std::vector<std::unique_ptr<Admitter>> others;
    std::unique_ptr<Admitter> deepseek_native;
    std::unique_ptr<Admitter> deepseek_engine;
};

Admitters loadAdmitters() {
    TokenizerLoad tokenizer = Tokenizer::load(tokenizerDir());
    if (!tokenizer.tokenizer) std::abort();
    std::vector<std::unique_ptr<Admitter>> admitters;
    auto add = [&](ChatTemplate::LoadOptions options) {
        std::string error;
        auto chat_template = ChatTemplate::load(options, error);
        if (!chat_template) std::abort();
        admitters.push_back(std::make_unique<Admitter>(tokenizer.tokenizer, chat_template));
    };
    for (const char* model : {"qwen3", "gemma3"}) {
        ChatTemplate::LoadOptions options;
        options.tokenizer = tokenizerDir().parent_path() / model;
        add(options);
    }
    ChatTemplate::LoadOptions tools;
    tools.tokenizer = tokenizerDir();
    tools.chat_template = std::filesystem::path(DPGATE_SOURCE_DIR) / "tests/golden/templates/deepseek_tools.jinja";
    add(tools);
    ChatTemplate::LoadOptions deepseek;
    deepseek.tokenizer = tokenizerDir();
    std::string error;
    auto deepseek_template = ChatTemplate::load(deepseek, error);
    if (!deepseek_template || !deepseek_template->defaultVariant().deepseek_v3_fast_path) std::abort();
    Admitters all{std::move(admitters), std::make_unique<Admitter>(tokenizer.tokenizer, deepseek_template),
                  std::make_unique<Admitter>(tokenizer.tokenizer, deepseek_template)};
    all.deepseek_native->setNativeRendering(true);  // whatever DPGATE_PLAIN says
    all.deepseek_engine->setNativeRendering(false);
    return all;
}

constexpr std::string_view kConversation =
    R"({"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},)"
    R"( {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {"arguments": {"a": [1, 2.5]}, "name": "f"}, "type": "function"}]},)"
    R"( {"role": "tool", "content": "r", "tool_call_id": "c"}],)"
    R"( "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}],)"
    R"( "add_generation_prompt": true, "bos_token": "<s>", "n": 3, "s": "text"})";

void renderTemplate(std::string_view source, std::string_view context_json) {
    std::string error;
    auto tpl = jinja::Template::parse(source, error);
    if (!tpl) return;
    jinja::Arena arena;
    jinja::RenderLimits limits;
    limits.steps = 200'000;
    limits.arena_bytes = 16u << 20;
    limits.output_bytes = 1u << 20;
    limits.max_call_depth = 64;
    // Under `ulimit -s 1024` with AddressSanitizer (whose frames are six
    // times larger), the backstop keeps the render within the stack.
    limits.stack_bytes = 512u << 10;
    jinja::Renderer renderer(*tpl, arena, limits);
    jinja::Value base;
    if (jinja::pyJsonLoads(kConversation, arena, base)) std::abort();
    for (std::size_t i = 0; i < base.asDict().size; ++i)
        renderer.setVariable(base.asDict().keys[i].text(), base.asDict().values[i]);
    jinja::Value extra;
    if (findInvalidUtf8(context_json) == kValidUtf8 && !jinja::pyJsonLoads(context_json, arena, extra) &&
        extra.isDict()) {
        for (std::size_t i = 0; i < extra.asDict().size; ++i) {
            if (extra.asDict().keys[i].isString())
                renderer.setVariable(extra.asDict().keys[i].text(), extra.asDict().values[i]);
        }
    }
    const std::size_t arena_before = arena.bytesUsed();
    std::string out = "kept";
    if (renderer.render(out)) {
        if (out != "kept") std::abort();  // a failed render leaves the output as it was
    } else if (out.size() - 4 > limits.output_bytes) {
        std::abort();
    }
    if (arena.bytesUsed() - arena_before > limits.arena_bytes) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    if ((data[0] & 1) == 0) {
        const std::size_t split = rest.find('\0');
        const std::string_view source = rest.substr(0, split);
        if (findInvalidUtf8(source) != kValidUtf8) return 0;  // template files are UTF-8 text
        renderTemplate(source, split == std::string_view::npos ? std::string_view() : rest.substr(split + 1));
        return 0;
    }
    static const auto admitters = loadAdmitters();
    const std::string body(rest);  // exact-size copy: ASan sees reads past the end
    for (const auto& admitter : admitters.others) {
        const Admitter::ChatCount count = admitter->countChat(body);
        if (count.ok && admitter->prompt().empty() && count.prompt_tokens != 0) std::abort();
    }
    const Admitter::ChatCount native = admitters.deepseek_native->countChat(body);
    const Admitter::ChatCount engine = admitters.deepseek_engine->countChat(body);
    if (native.ok != engine.ok) std::abort();
    if (native.ok && (native.prompt_tokens != engine.prompt_tokens ||
                      admitters.deepseek_native->prompt() != admitters.deepseek_engine->prompt())) {
        std::abort();
    }
    return 0;
}
