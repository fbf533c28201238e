// admitQuickly(): the same verdict as admit() for what real templates make
// of a small body, nullopt where rendering or counting would go beyond the
// bound a worker thread may spend (the request is then judged elsewhere).
#include "admission/admit.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dpgate::admission {
namespace {

constexpr Admitter::QuickBound kBound{.prompt_bytes = 144 << 10, .render_steps = 50'000};

std::shared_ptr<const ChatTemplate> toolsTemplate() {
    std::string error;
    ChatTemplate::LoadOptions options;
    options.tokenizer = test::tokenizerDir();
    options.chat_template = test::goldenDir() / "templates/deepseek_tools.jinja";
    auto loaded = ChatTemplate::load(options, error);
    EXPECT_NE(loaded, nullptr) << error;
    return loaded;
}

// A tool call whose arguments the golden tools template prints with
// tojson(indent=tool_json_indent): `indent` spaces, `depth` levels.
std::string indentedToolCall(std::size_t indent, std::size_t depth) {
    return R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":"hi"},)"
           R"({"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function",)"
           R"("function":{"name":"f","arguments":{"a":)" +
           std::string(depth, '[') + "0" + std::string(depth, ']') +
           R"(}}}]},{"role":"tool","tool_call_id":"c","content":"r"}],)"
           R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],)"
           R"("chat_template_kwargs":{"tool_json_indent":)" +
           std::to_string(indent) + "}}";
}

TEST(AdmitQuickly, GivesAdmitsVerdictForOrdinaryBodies) {
    Admitter quick(test::referenceTokenizer(), toolsTemplate());
    Admitter plain(test::referenceTokenizer(), toolsTemplate());
    const AdmissionLimits limits;
    for (const std::string& body : {indentedToolCall(2, 3),
                                    std::string(R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user",)"
                                                R"("content":")") +
                                        std::string(100'000, 'x') + "\"}]}",
                                    std::string(R"({"model":"nope","messages":[]})")}) {
        const std::optional<Verdict> judged =
            quick.admitQuickly(body, body.size(), Endpoint::chat_completions, limits, kBound);
        ASSERT_TRUE(judged.has_value()) << test::escaped(body);
        const Verdict expected = plain.admit(body, Endpoint::chat_completions, limits);
        ASSERT_EQ(judged->index(), expected.index());
        if (const auto* admitted = std::get_if<Admitted>(&*judged)) {
            EXPECT_EQ(admitted->prompt_tokens, std::get<Admitted>(expected).prompt_tokens);
        } else {
            EXPECT_EQ(std::get<Refused>(*judged).message, std::get<Refused>(expected).message);
        }
    }
}

TEST(AdmitQuickly, LeavesATemplateThatMakesMuchOfASmallBodyToAdmit) {
    Admitter admitter(test::referenceTokenizer(), toolsTemplate());
    const AdmissionLimits limits;
    // 3 KB of body, a prompt of megabytes: within admit()'s budget, past the quick one.
    const std::string body = indentedToolCall(2'000, 40);
    ASSERT_LT(body.size(), 4'000u);
    EXPECT_FALSE(admitter.admitQuickly(body, body.size(), Endpoint::chat_completions, limits, kBound).has_value());
    const Verdict full = admitter.admit(body, Endpoint::chat_completions, limits);
    ASSERT_TRUE(std::holds_alternative<Admitted>(full)) << std::get<Refused>(full).message;
    EXPECT_GT(admitter.prompt().size(), kBound.prompt_bytes);
    // The same Admitter judges the next ordinary request quickly again.
    const std::string next = indentedToolCall(2, 3);
    EXPECT_TRUE(admitter.admitQuickly(next, next.size(), Endpoint::chat_completions, limits, kBound).has_value());
}

TEST(AdmitQuickly, LeavesRenderWorkBeyondItsStepsToAdmit) {
    Admitter admitter(test::referenceTokenizer(), toolsTemplate());
    const AdmissionLimits limits;
    // Ten thousand tool calls: little text each, a step or more each.
    std::string calls;
    for (int i = 0; i < 10'000; ++i)
        calls += std::string(i ? "," : "") + R"({"id":"c","type":"function","function":{"name":"f","arguments":{}}})";
    const std::string body = R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":"hi"},)"
                             R"({"role":"assistant","content":"","tool_calls":[)" +
                             calls + "]}]}";
    const Admitter::QuickBound few_steps{.prompt_bytes = 16 << 20, .render_steps = 5'000};
    EXPECT_FALSE(admitter.admitQuickly(body, body.size(), Endpoint::chat_completions, limits, few_steps).has_value());
    EXPECT_TRUE(std::holds_alternative<Admitted>(admitter.admit(body, Endpoint::chat_completions, limits)));
}

TEST(AdmitQuickly, LeavesCompletionsPromptsBeyondItsBytesToAdmit) {
    Admitter admitter(test::referenceTokenizer(), test::referenceChatTemplate());
    const AdmissionLimits limits;
    const std::string body = R"({"model":"ds-v4.1-flash-1017","prompt":[")" + std::string(100'000, 'a') + R"(",")" +
                             std::string(100'000, 'b') + R"("]})";
    EXPECT_FALSE(admitter.admitQuickly(body, body.size(), Endpoint::completions, limits, kBound).has_value());
    EXPECT_TRUE(std::holds_alternative<Admitted>(admitter.admit(body, Endpoint::completions, limits)));
}

}  // namespace
}  // namespace dpgate::admission
