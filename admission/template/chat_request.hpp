#pragma once
// A chat completions request reduced to what vLLM hands a chat template
// (docs/VLLM_RENDERING.md). Strings view the scanner's parse of the body and
// Values live in the admission arena: both stay valid until the next scan,
// so a 4 MB conversation is never copied to be rendered.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "admission/template/jinja/value.hpp"

namespace dpgate::admission {

struct ChatContentPart {
    enum class Kind : std::uint8_t { text, image };
    Kind kind;
    std::string_view text;  // text parts
};

struct ChatMessage {
    std::string_view role;
    // Absent or null content. Distinct from "" (an empty string or a list
    // without parts), which some templates treat differently.
    bool content_null = true;
    bool content_is_string = false;
    // A string content is one text part, held without an allocation.
    boost::container::small_vector<ChatContentPart, 1> parts;
    std::uint32_t images = 0;  // image_url / input_image parts
    // Assistant `tool_calls` (non-null): the calls as the template sees them,
    // {"id", "function": {"arguments" (parsed), "name"}, "type"}.
    bool has_tool_calls = false;
    jinja::Value tool_calls;
    bool has_tool_call_id = false;  // the key is present (even null)
    jinja::Value tool_call_id;
    bool has_name = false;  // a string `name`
    std::string_view name;
    bool has_reasoning = false;  // `reasoning`, else `reasoning_content`, non-null
    std::string_view reasoning;

    // The text parts joined with "\n" would be vLLM's string content.
    template <typename F>
    void forEachText(F&& f) const {
        for (const ChatContentPart& part : parts) {
            if (part.kind == ChatContentPart::Kind::text) f(part.text);
        }
    }
};

struct ChatRequest {
    std::vector<ChatMessage> messages;
    // None when absent or null; else the tools as vLLM dumps them.
    jinja::Value tools = jinja::Value::none();
    std::string_view tools_json;        // the `tools` value's bytes as sent (the affinity head covers them)
    jinja::Value chat_template_kwargs;  // undefined when absent or null; else a dict
    bool add_generation_prompt = true;
    bool continue_final_message = false;
    jinja::Value documents = jinja::Value::none();
    jinja::Value reasoning_effort = jinja::Value::none();
    bool add_special_tokens = false;
    std::optional<std::int64_t> truncate_prompt_tokens;  // -1: the model's input budget
};

}  // namespace dpgate::admission
