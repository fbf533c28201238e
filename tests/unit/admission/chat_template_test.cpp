// DeepSeek V3 template behaviour beyond the golden corpus: request shapes the
// reference refuses, and the content-array and role rules.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "admission/template/chat_encoder.hpp"
#include "admission/template/chat_request_from_json.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

struct Rendered {
  std::string prompt;
  std::string error;
};

Rendered render(const char* body_json) {
  const auto body = nlohmann::json::parse(body_json);
  ChatRequest request;
  if (auto error = chatRequestFromJson(body, request)) return {"", *error};
  std::string error;
  const auto encoder = makeChatEncoder("deepseek-v3", error);
  std::string prompt;
  if (auto render_error = encoder->render(request, prompt)) return {"", *render_error};
  return {prompt, ""};
}

TEST(DeepSeekV3Template, SystemAndDeveloperJoinAfterBos) {
  EXPECT_EQ(render(R"({"messages":[{"role":"system","content":"a"},{"role":"user","content":"u"},{"role":"developer","content":"b"}]})").prompt,
            "<｜begin▁of▁sentence｜>a\n\nb<｜User｜>u<｜Assistant｜>");
}

TEST(DeepSeekV3Template, TextPartsJoinWithNewlineAndImagesAreNotText) {
  EXPECT_EQ(render(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]}]})").prompt,
            "<｜begin▁of▁sentence｜><｜User｜>a\nb<｜Assistant｜>");
}

TEST(DeepSeekV3Template, ToolCallsAcrossTurnsAndTrailingToolOutputs) {
  const char* body = R"({"messages":[
    {"role":"user","content":"q"},
    {"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]},
    {"role":"tool","content":"r1"},
    {"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"g","arguments":"{\"x\":1}"}}]},
    {"role":"tool","content":"r2"}]})";
  EXPECT_EQ(render(body).prompt,
            "<｜begin▁of▁sentence｜><｜User｜>q<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```"
            "<｜tool▁call▁end｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>r1<｜tool▁output▁end｜>\n<｜tool▁call▁begin｜>function"
            "<｜tool▁sep｜>g\n```json\n{\"x\":1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>\n<｜tool▁output▁begin｜>r2"
            "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>");
}

TEST(DeepSeekV3Template, AssistantContentWinsOverToolCalls) {
  EXPECT_EQ(render(R"({"messages":[{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]})").prompt,
            "<｜begin▁of▁sentence｜><｜Assistant｜><｜end▁of▁sentence｜><｜Assistant｜>");
}

TEST(DeepSeekV3Template, RefusesWhatTheReferenceCannotRender) {
  EXPECT_EQ(render(R"({"messages":[{"role":"narrator","content":"x"}]})").error, "messages[0].role: unknown role \"narrator\"");
  EXPECT_EQ(render(R"({"messages":[{"role":"user","content":null}]})").error, "messages[0].content: must not be null for role user");
  EXPECT_EQ(render(R"({"messages":[{"role":"assistant"}]})").error, "messages[0]: assistant message needs content or tool_calls");
  EXPECT_EQ(render(R"({"messages":[{"role":"user","content":[{"type":"input_audio"}]}]})").error,
            "messages[0].content[0].type: unsupported content part \"input_audio\"");
  EXPECT_EQ(render(R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":{}}}]}]})").error,
            "messages[0].tool_calls[0].function.arguments: must be a string");
  EXPECT_EQ(render(R"({"messages":{}})").error, "messages: must be an array");
}

TEST(DeepSeekV3Template, CountsTokensAndImages) {
  const auto tokenizer = test::referenceTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  std::string error;
  const auto encoder = makeChatEncoder("deepseek-v3", error);
  ASSERT_FALSE(encoder->checkTokenizer(*tokenizer).has_value());
  const auto body = nlohmann::json::parse(R"({"messages":[{"role":"user","content":[{"type":"input_image","image_url":"u"},{"type":"text","text":"Hello world"},{"type":"image_url","image_url":{"url":"x"}}]}]})");
  ChatRequest request;
  ASSERT_FALSE(chatRequestFromJson(body, request).has_value());
  TokenCounter counter(tokenizer);
  const PromptCount count = encoder->count(request, counter);
  ASSERT_TRUE(count.ok) << count.error;
  EXPECT_EQ(count.images, 2u);
  EXPECT_EQ(count.prompt_tokens, 5u);  // BOS, User, "Hello", " world", Assistant
}

TEST(ChatEncoderFactory, UnknownTemplateIsAnError) {
  std::string error;
  EXPECT_EQ(makeChatEncoder("deepseek-v9", error), nullptr);
  EXPECT_EQ(error, "unknown chat template \"deepseek-v9\" (known: deepseek-v3)");
}

}  // namespace
}  // namespace dpgate::admission
