#pragma once
// The served model's chat template, loaded once from the model's files as
// vLLM loads it (docs/VLLM_RENDERING.md): `model.chat_template` (a Jinja
// file, vLLM's --chat-template), else `chat_template.jinja` beside the
// tokenizer, else the `chat_template` of its tokenizer_config.json (a string,
// or named templates of which "default" and "tool_use" are used). The
// tokenizer_config.json also supplies the special-token variables
// (bos_token, eos_token, ...) and add_bos_token for add_special_tokens.
//
// Immutable after load; share between threads.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/template/jinja/template.hpp"

namespace dpgate::admission {

// How message content reaches the template (vLLM's
// --chat-template-content-format): joined strings or lists of parts.
enum class ContentFormat { string, openai };
std::string_view contentFormatName(ContentFormat format);

// vLLM's auto-detection: `openai` when some `for` loop iterates over the
// content of a message taken from `messages` (docs/VLLM_RENDERING.md §2).
ContentFormat detectContentFormat(const jinja::Template& tpl);

class ChatTemplate {
public:
    struct Variant {
        std::string name;  // "default", "tool_use", or the file it came from
        std::shared_ptr<const jinja::Template> tpl;
        ContentFormat content_format = ContentFormat::string;
        // The template is DeepSeek V3's own and renders with the string
        // format: deepseek_v3_fast_path.hpp can render it natively.
        bool deepseek_v3_fast_path = false;
        // Interned ids of the variables every render sets (kNoName where the
        // template never reads them), looked up once at load.
        struct Ids {
            std::uint32_t messages, tools, documents, add_generation_prompt, reasoning_effort, enable_thinking,
                additional_special_tokens;
            std::vector<std::uint32_t> special_tokens;  // parallel to specialTokens()
        } ids{};
    };

    struct LoadOptions {
        std::filesystem::path tokenizer;      // tokenizer.json or its directory
        std::filesystem::path chat_template;  // a Jinja file; empty: from the tokenizer's directory
        std::string content_format = "auto";  // auto | string | openai
    };

    // Null with `error` set when no template can be found or parsed.
    static std::shared_ptr<const ChatTemplate> load(const LoadOptions& options, std::string& error);
    // From a template's source and a tokenizer_config.json's text (tests,
    // the fuzzer). `tokenizer_config_json` may be empty.
    static std::shared_ptr<const ChatTemplate> fromSource(std::string_view source,
                                                          std::string_view tokenizer_config_json,
                                                          std::string_view content_format, std::string& error);

    // The variant vLLM uses for a request: "tool_use" when the request has
    // tools and the model names one, else the default.
    const Variant& variantFor(bool request_has_tools) const;
    const Variant& defaultVariant() const { return variants_.front(); }
    const std::vector<Variant>& variants() const { return variants_; }

    // Where the template came from ("tokenizer_config.json chat_template", a path).
    const std::string& origin() const { return origin_; }
    // The template text (all variants, in order), for digests.
    const std::string& source() const { return source_; }

    // Special-token variables (name, text) in tokenizer_config.json order;
    // additional_special_tokens is a list and kept apart.
    const std::vector<std::pair<std::string, std::string>>& specialTokens() const { return special_tokens_; }
    const std::vector<std::string>& additionalSpecialTokens() const { return additional_special_tokens_; }
    // What the tokenizer adds around the prompt when a request sets
    // add_special_tokens (vLLM's default for chat is not to).
    const std::optional<std::string>& addedBos() const { return added_bos_; }
    const std::optional<std::string>& addedEos() const { return added_eos_; }

    // Whether rendering a request with a tool differs from rendering it
    // without (measured at load with a probe request); nullopt when the probe
    // itself failed (`probeError()` says why).
    std::optional<bool> rendersTools() const { return renders_tools_; }
    const std::string& probeError() const { return probe_error_; }

private:
    ChatTemplate() = default;
    static std::shared_ptr<const ChatTemplate> build(std::vector<std::pair<std::string, std::string>> sources,
                                                     std::string origin, std::string_view tokenizer_config_json,
                                                     std::string_view content_format, std::string& error);
    void probeTools();

    std::vector<Variant> variants_;
    std::string origin_;
    std::string source_;
    std::vector<std::pair<std::string, std::string>> special_tokens_;
    std::vector<std::string> additional_special_tokens_;
    std::optional<std::string> added_bos_;
    std::optional<std::string> added_eos_;
    std::optional<bool> renders_tools_;
    std::string probe_error_;
};

}  // namespace dpgate::admission
