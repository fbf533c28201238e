// The golden suite (tests/golden/chat_templates.jsonl): every request body,
// scanned, rendered with vLLM's preprocessing and the named template, and
// counted, must give exactly the prompt and the token count the reference
// gave (@huggingface/jinja, and Python's Jinja2 where the two disagree), or
// fail where the reference failed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>

#include "admission/admit.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

std::shared_ptr<const ChatTemplate> templateNamed(const std::string& name, std::string& error) {
    ChatTemplate::LoadOptions options;
    if (name == "deepseek-tools") {
        options.tokenizer = test::tokenizerDir();
        options.chat_template = test::goldenDir() / "templates/deepseek_tools.jinja";
    } else {
        options.tokenizer = test::tokenizerDir().parent_path() / name;
    }
    return ChatTemplate::load(options, error);
}

TEST(ChatGolden, EveryTemplateRendersAndCountsAsTheReference) {
    std::ifstream in(test::goldenDir() / "chat_templates.jsonl");
    ASSERT_TRUE(in) << "tests/golden/chat_templates.jsonl missing";
    std::map<std::string, std::unique_ptr<Admitter>> admitters;
    std::map<std::string, std::size_t> lines;
    std::size_t errors = 0;
    std::string line;
    while (std::getline(in, line)) {
        const auto golden = nlohmann::json::parse(line);
        const std::string name = golden.at("template").get<std::string>();
        auto& admitter = admitters[name];
        if (!admitter) {
            std::string error;
            auto chat_template = templateNamed(name, error);
            ASSERT_NE(chat_template, nullptr) << name << ": " << error;
            ASSERT_EQ(contentFormatName(chat_template->defaultVariant().content_format),
                      golden.at("format").get<std::string>())
                << name << ": the content format vLLM's detection gives";
            admitter = std::make_unique<Admitter>(test::referenceTokenizer(), chat_template);
        }
        const std::size_t index = lines[name]++;
        const std::string body = golden.at("body").get<std::string>();
        const Admitter::ChatCount count = admitter->countChat(body);
        if (golden.contains("error")) {
            EXPECT_FALSE(count.ok) << name << " line " << index << ": the reference failed with " << golden.at("error")
                                   << "; dpgate rendered " << test::escaped(admitter->prompt());
            ++errors;
            continue;
        }
        ASSERT_TRUE(count.ok) << name << " line " << index << ": " << count.error << "\n" << test::escaped(body, 600);
        EXPECT_EQ(admitter->prompt(), golden.at("prompt").get<std::string>()) << name << " line " << index << "\n"
                                                                              << test::escaped(body, 600);
        EXPECT_EQ(count.prompt_tokens, golden.at("prompt_tokens").get<std::uint64_t>()) << name << " line " << index;
        EXPECT_EQ(count.images, golden.at("images").get<std::uint32_t>()) << name << " line " << index;
    }
    EXPECT_EQ(lines.size(), 5u);
    for (const auto& [name, n] : lines) EXPECT_GE(n, 200u) << name;
    EXPECT_GT(errors, 0u);
}

// DeepSeek V3's own template is rendered natively (deepseek_v3_fast_path.hpp);
// every golden body (those written for the other templates too: images,
// tools, template kwargs) rendered with it by the engine instead must give
// the same prompt, byte for byte, and fail where the native rendering fails.
TEST(ChatGolden, DeepSeekV3NativeRenderingIsTheEngines) {
    std::string error;
    auto chat_template = templateNamed("deepseek-v3", error);
    ASSERT_NE(chat_template, nullptr) << error;
    ASSERT_TRUE(chat_template->defaultVariant().deepseek_v3_fast_path) << "DeepSeek V3's template not recognised";
    Admitter native(test::referenceTokenizer(), chat_template);
    Admitter engine(test::referenceTokenizer(), chat_template);
    native.setNativeRendering(true);  // whatever DPGATE_PLAIN says
    engine.setNativeRendering(false);
    std::ifstream in(test::goldenDir() / "chat_templates.jsonl");
    ASSERT_TRUE(in);
    std::size_t compared = 0;
    std::string line;
    while (std::getline(in, line)) {
        const auto golden = nlohmann::json::parse(line);
        const std::string body = golden.at("body").get<std::string>();
        const Admitter::ChatCount a = native.countChat(body);
        const Admitter::ChatCount b = engine.countChat(body);
        ASSERT_EQ(a.ok, b.ok) << (a.ok ? b.error : a.error) << "\n" << test::escaped(body, 600);
        EXPECT_EQ(native.prompt(), engine.prompt()) << test::escaped(body, 600);
        EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
        ++compared;
    }
    EXPECT_EQ(compared, 1500u);
}

}  // namespace
}  // namespace dpgate::admission
