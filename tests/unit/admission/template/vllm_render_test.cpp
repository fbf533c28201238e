// vLLM's rendering of a request (docs/VLLM_RENDERING.md) through the
// Admitter: what the template sees, the model's own template files, content
// format detection, and the admission rules that follow from tools.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "admission/admit.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

std::shared_ptr<const ChatTemplate> inlineTemplate(std::string_view source, std::string_view config = "",
                                                   std::string_view format = "auto") {
    std::string error;
    auto t = ChatTemplate::fromSource(source, config, format, error);
    EXPECT_NE(t, nullptr) << error;
    return t;
}

std::shared_ptr<const ChatTemplate> modelTemplate(const std::string& model) {
    std::string error;
    ChatTemplate::LoadOptions options;
    options.tokenizer = test::tokenizerDir().parent_path() / model;
    auto t = ChatTemplate::load(options, error);
    EXPECT_NE(t, nullptr) << model << ": " << error;
    return t;
}

// The rendered prompt of `body`, or "error: ..." when it cannot be rendered.
std::string prompt(const std::shared_ptr<const ChatTemplate>& t, const std::string& body) {
    Admitter admitter(test::referenceTokenizer(), t);
    const Admitter::ChatCount count = admitter.countChat(body);
    if (!count.ok) return "error: " + count.error;
    return admitter.prompt();
}

std::string chatBody(const std::string& messages, const std::string& extra = "") {
    return R"({"model":"ds-v4.1-flash-1017",)" + (extra.empty() ? "" : extra + ",") + R"("messages":)" + messages + "}";
}

TEST(ContentFormat, DetectedAsVllmDoes) {
    EXPECT_EQ(modelTemplate("gemma3")->defaultVariant().content_format, ContentFormat::openai);
    for (const char* model : {"deepseek-v3", "qwen3", "llama3-1"}) {
        EXPECT_EQ(modelTemplate(model)->defaultVariant().content_format, ContentFormat::string) << model;
    }
    auto format = [](std::string_view source) { return inlineTemplate(source)->defaultVariant().content_format; };
    EXPECT_EQ(
        format("{% set msgs = messages[1:] %}{% for m in msgs %}{% for p in m['content'] %}{% endfor %}{% endfor %}"),
        ContentFormat::openai);
    EXPECT_EQ(
        format("{% for m in messages|reverse %}{% for p in m.content|selectattr('type') %}{% endfor %}{% endfor %}"),
        ContentFormat::openai);
    EXPECT_EQ(format("{% for m in messages %}{{ m.content }}{% endfor %}"), ContentFormat::string);
    EXPECT_EQ(format("{% for p in message.content %}{% endfor %}"), ContentFormat::string);  // no loop over messages
    // vLLM gives up (string) when a loop target is not a plain name.
    EXPECT_EQ(format("{% for a, b in messages %}{% for p in a.content %}{% endfor %}{% endfor %}"),
              ContentFormat::string);
    EXPECT_EQ(inlineTemplate("{% for m in messages %}{% endfor %}", "", "openai")->defaultVariant().content_format,
              ContentFormat::openai);
}

TEST(ChatTemplateFiles, ModelsOwnTemplateSpecialTokensAndToolProbe) {
    const auto deepseek = test::referenceChatTemplate();
    EXPECT_NE(deepseek->origin().find("tokenizer_config.json"), std::string::npos);
    ASSERT_TRUE(deepseek->rendersTools().has_value()) << deepseek->probeError();
    EXPECT_FALSE(*deepseek->rendersTools());  // DeepSeek V3's template has no tools section
    ASSERT_TRUE(deepseek->addedBos().has_value());
    EXPECT_EQ(*deepseek->addedBos(), "<｜begin▁of▁sentence｜>");
    const auto qwen = modelTemplate("qwen3");
    ASSERT_TRUE(qwen->rendersTools().has_value());
    EXPECT_TRUE(*qwen->rendersTools());
    EXPECT_FALSE(qwen->addedBos().has_value());
}

TEST(ChatTemplateFiles, ChatTemplateJinjaAndNamedTemplates) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "dpgate_chat_template_files";
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(test::tokenizerDir() / "tokenizer.json", dir / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::ofstream(dir / "tokenizer_config.json")
        << R"({"bos_token": "<s>", "chat_template": [{"name": "tool_use", "template": "T{{ tools|length }}"},)"
           R"( {"name": "default", "template": "D{{ bos_token }}"}]})";
    ChatTemplate::LoadOptions options;
    options.tokenizer = dir;
    std::string error;
    auto named = ChatTemplate::load(options, error);
    ASSERT_NE(named, nullptr) << error;
    EXPECT_EQ(prompt(named, chatBody(R"([{"role":"user","content":"x"}])")), "D<s>");
    EXPECT_EQ(prompt(named, chatBody(R"([{"role":"user","content":"x"}])",
                                     R"("tools":[{"type":"function","function":{"name":"f"}}])")),
              "T1");
    // chat_template.jinja beside the tokenizer wins over tokenizer_config.json's.
    std::ofstream(dir / "chat_template.jinja") << "J{{ messages|length }}";
    auto file = ChatTemplate::load(options, error);
    ASSERT_NE(file, nullptr) << error;
    EXPECT_EQ(prompt(file, chatBody(R"([{"role":"user","content":"x"}])")), "J1");
    std::filesystem::remove_all(dir);
    EXPECT_EQ(ChatTemplate::load(options, error), nullptr);
    EXPECT_FALSE(error.empty());
}

// vLLM hands DeepSeek V3's template content "" for an assistant message
// with tool_calls and content null, so the template renders no tool call at
// all.
TEST(VllmRendering, NullContentBecomesEmptyAndDeepSeekV3DropsToolCalls) {
    const std::string body = chatBody(
        R"([{"role":"user","content":"weather?"},)"
        R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},)"
        R"({"role":"tool","tool_call_id":"c1","content":"sunny"}])");
    EXPECT_EQ(prompt(test::referenceChatTemplate(), body),
              "<｜begin▁of▁sentence｜><｜User｜>weather?<｜Assistant｜><｜end▁of▁sentence｜>"
              "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>sunny<｜tool▁output▁end｜><｜tool▁outputs▁end｜>");
}

TEST(VllmRendering, WhatTheTemplateSees) {
    const auto show = inlineTemplate(
        "{% for m in messages %}{{ m.role }}:{{ m.content|tojson }}"
        "{% if m.tool_calls is defined %} calls={{ m.tool_calls|tojson }}{% endif %}"
        "{% if m.reasoning_content is defined %} reasoning={{ m.reasoning_content }}/{{ m.reasoning }}{% endif %}"
        "{% if m.tool_call_id is defined %} id={{ m.tool_call_id }}{% endif %}"
        "{% if m.name is defined %} name={{ m.name }}{% endif %};{% endfor %}"
        "|tools={{ tools|tojson }}|agp={{ add_generation_prompt }}|x={{ x }}|think={{ enable_thinking }}");
    EXPECT_EQ(
        prompt(
            show,
            chatBody(
                R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"b"}],"name":"ann"},)"
                R"({"role":"assistant","content":null,"reasoning_content":"hm","tool_calls":[{"type":"function","function":{"arguments":"{\"n\": 1.0, \"n\": 2, \"big\": 123456789012345678901}","name":"f"},"id":"c"}]},)"
                R"({"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"g","arguments":"not json"}}]},)"
                R"({"role":"tool","content":"r","tool_call_id":null}])",
                R"("tools":[{"function":{"strict":true,"name":"f","extra":1},"type":"function","other":2}],)"
                R"("add_generation_prompt":false,"chat_template_kwargs":{"x":"X","enable_thinking":null},"reasoning_effort":"low")")),
        R"(user:"a\nb" name=ann;)"
        R"(assistant:"" calls=[{"id": "c", "function": {"arguments": {"n": 2, "big": 123456789012345678901}, "name": "f"}, "type": "function"}] reasoning=hm/hm;)"
        R"(assistant:"" calls=[{"function": {"arguments": {}, "name": "g"}, "type": "function"}];)"
        R"(tool:"r" id=None;)"
        R"(|tools=[{"type": "function", "function": {"name": "f", "description": null, "parameters": null, "strict": true}}])"
        R"(|agp=False|x=X|think=)");
    // Without tools the template sees None; reasoning_effort alone sets enable_thinking.
    EXPECT_EQ(prompt(show, chatBody(R"([{"role":"user","content":"q"}])", R"("reasoning_effort":"none")")),
              R"(user:"q";|tools=null|agp=True|x=|think=False)");
}

TEST(VllmRendering, OpenAiFormatPartsAndFlattenedToolResults) {
    const auto parts = inlineTemplate(
        "{% for m in messages %}{% if m.content is string %}S:{{ m.content }}{% else %}"
        "{% for p in m.content %}[{{ p.type }}{{ ':' ~ p.text if p.text is defined }}]{% endfor %}{% endif %};{% "
        "endfor %}");
    EXPECT_EQ(parts->defaultVariant().content_format, ContentFormat::openai);
    EXPECT_EQ(
        prompt(
            parts,
            chatBody(
                R"([{"role":"user","content":"hi"},)"
                R"({"role":"user","content":[{"type":"input_image","image_url":"u"},{"type":"refusal","refusal":"no"}]},)"
                R"({"role":"assistant","content":null},)"
                R"({"role":"tool","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}])")),
        "[text:hi];[image][text:no];;S:x\ny;");
}

TEST(VllmRendering, QwenSeesKwargsAndContinueFinalMessage) {
    const auto qwen = modelTemplate("qwen3");
    EXPECT_EQ(prompt(qwen, chatBody(R"([{"role":"user","content":"hi"}])",
                                    R"("chat_template_kwargs":{"enable_thinking":false})")),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    EXPECT_EQ(prompt(qwen, chatBody(R"([{"role":"user","content":"hi"},{"role":"assistant","content":"Once upon"}])",
                                    R"("add_generation_prompt":false,"continue_final_message":true)")),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOnce upon");
}

TEST(VllmRendering, RefusedAsVllmRefuses) {
    const auto t = test::referenceChatTemplate();
    const std::string user = R"([{"role":"user","content":"hi"}])";
    EXPECT_NE(
        prompt(t, chatBody(user, R"("chat_template_kwargs":{"tokenize":true})")).find("chat_template_kwargs.tokenize"),
        std::string::npos);
    EXPECT_NE(prompt(t, chatBody(user, R"("continue_final_message":true)")).find("add_generation_prompt"),
              std::string::npos);
    EXPECT_NE(prompt(t, chatBody(user, R"("tool_choice":"required")")).find("`tools` must be set"), std::string::npos);
    EXPECT_NE(
        prompt(
            t,
            chatBody(
                user,
                R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}})"))
            .find("does not match"),
        std::string::npos);
    EXPECT_NE(prompt(t, chatBody(user, R"("chat_template":"{{ 1 }}")")).find("--trust-request-chat-template"),
              std::string::npos);
    EXPECT_NE(
        prompt(t, chatBody(user, R"("tools":[{"type":"retrieval","function":{"name":"f"}}])")).find("tools[0].type"),
        std::string::npos);
    EXPECT_NE(prompt(t, chatBody(user, R"("tools":[{"type":"function","function":{"parameters":{}}}])"))
                  .find("tools[0].function.name"),
              std::string::npos);
    EXPECT_NE(prompt(t, chatBody(user, R"("tools":[{"type":"function","function":{"name":"f","parameters":[1]}}])"))
                  .find("parameters"),
              std::string::npos);
    EXPECT_NE(prompt(t, chatBody(user, R"("reasoning_effort":"extreme")")).find("reasoning_effort"), std::string::npos);
    // A template's own refusal is the message.
    const auto strict =
        inlineTemplate("{% if messages|length > 1 %}{{ raise_exception('one message only') }}{% endif %}");
    EXPECT_EQ(prompt(strict, chatBody(R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])")),
              "error: one message only");
    // tool_choice "required" with an empty list: vLLM drops the tools.
    const auto tools = inlineTemplate("{{ tools is none }}");
    EXPECT_EQ(prompt(tools, chatBody(user, R"("tools":[],"tool_choice":"required")")), "True");
    EXPECT_EQ(prompt(tools, chatBody(user, R"("tools":[])")), "False");
}

TEST(VllmRendering, AddSpecialTokensAndTruncation) {
    Admitter admitter(test::referenceTokenizer(), test::referenceChatTemplate());
    const std::string user = R"([{"role":"user","content":"hi"}])";
    const std::uint64_t plain = admitter.countChat(chatBody(user)).prompt_tokens;
    EXPECT_EQ(admitter.countChat(chatBody(user, R"("add_special_tokens":true)")).prompt_tokens,
              plain + 1);  // BOS again
    EXPECT_EQ(admitter.countChat(chatBody(user, R"("truncate_prompt_tokens":2)")).prompt_tokens, 2u);
}

std::string toolsOf(std::size_t tools, std::size_t description_words) {
    std::string out = "[";
    for (std::size_t i = 0; i < tools; ++i) {
        std::string description;
        for (std::size_t w = 0; w < description_words; ++w)
            description += "word" + std::to_string((i * 131 + w) % 977) + " ";
        if (i > 0) out += ",";
        out += R"({"type":"function","function":{"name":"tool)";
        out += std::to_string(i);
        out += R"(","description":")";
        out += description;
        out += R"(","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}})";
    }
    return out + "]";
}

// Tool definitions count when the served template renders them: the same
// request is refused with Qwen3's template and admitted with DeepSeek V3's.
TEST(AdmissionWithTools, ToolsPushOverTheWindowOnlyWhereTheTemplateRendersThem) {
    const std::string body =
        chatBody(R"([{"role":"user","content":"hi"}])", R"("max_tokens":16,"tools":)" + toolsOf(40, 200));
    AdmissionLimits limits;
    limits.window_tokens = 2000;
    Admitter renders(test::referenceTokenizer(), modelTemplate("qwen3"));
    const Verdict refused = renders.admit(body, Endpoint::chat_completions, limits);
    ASSERT_TRUE(std::holds_alternative<Refused>(refused));
    EXPECT_EQ(std::get<Refused>(refused).code, "context_length_exceeded");
    Admitter ignores(test::referenceTokenizer(), test::referenceChatTemplate());
    const Verdict admitted = ignores.admit(body, Endpoint::chat_completions, limits);
    ASSERT_TRUE(std::holds_alternative<Admitted>(admitted)) << std::get<Refused>(admitted).message;
    EXPECT_LT(std::get<Admitted>(admitted).prompt_tokens, 20u);
}

TEST(AdmissionWithTools, ConversationHeadCoversTheTools) {
    Admitter admitter(test::referenceTokenizer(), test::referenceChatTemplate());
    AdmissionLimits limits;
    const std::string user = R"([{"role":"user","content":"hi"}])";
    auto head = [&](const std::string& extra) {
        const Verdict v = admitter.admit(chatBody(user, extra), Endpoint::chat_completions, limits);
        EXPECT_TRUE(std::holds_alternative<Admitted>(v));
        return std::holds_alternative<Admitted>(v) ? std::get<Admitted>(v).head_hash : 0;
    };
    EXPECT_NE(head(R"("tools":)" + toolsOf(1, 3)), head(R"("tools":)" + toolsOf(2, 3)));
    EXPECT_EQ(head(R"("tools":)" + toolsOf(2, 3)), head(R"("tools":)" + toolsOf(2, 3) + R"(,"temperature":0)"));
    EXPECT_NE(head(""), head(R"("tools":)" + toolsOf(1, 3)));
}

}  // namespace
}  // namespace dpgate::admission
