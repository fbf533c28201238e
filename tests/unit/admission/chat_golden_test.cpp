// Every chat request of the golden corpus must render to the reference
// prompt (@huggingface/jinja on the model's chat_template) and count to the
// reference token count.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "admission/template/chat_encoder.hpp"
#include "admission/template/chat_request_from_json.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

TEST(ChatGolden, PromptAndCountMatchReference) {
  const auto tokenizer = test::referenceTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  std::string error;
  const auto encoder = makeChatEncoder("deepseek-v3", error);
  ASSERT_NE(encoder, nullptr) << error;
  ASSERT_FALSE(encoder->checkTokenizer(*tokenizer).has_value());
  TokenCounter counter(tokenizer);

  std::ifstream in(test::goldenDir() / "chat_requests.jsonl");
  std::string line;
  std::size_t total = 0;
  std::size_t mismatches = 0;
  while (std::getline(in, line)) {
    const auto golden = nlohmann::json::parse(line);
    ++total;
    ChatRequest request;
    const auto parse_error = chatRequestFromJson(golden.at("request"), request);
    ASSERT_FALSE(parse_error.has_value()) << *parse_error;
    std::string prompt;
    ASSERT_FALSE(encoder->render(request, prompt).has_value());
    const PromptCount count = encoder->count(request, counter);
    ASSERT_TRUE(count.ok) << count.error;
    const std::string& want_prompt = golden.at("prompt").get_ref<const std::string&>();
    const bool same = prompt == want_prompt && count.prompt_tokens == golden.at("prompt_tokens").get<std::uint64_t>() &&
                      count.images == golden.at("images").get<std::uint32_t>();
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << "request " << total - 1 << ": tokens " << count.prompt_tokens << " vs " << golden.at("prompt_tokens")
                    << ", images " << count.images << " vs " << golden.at("images") << "\n got: " << test::escaped(prompt, 2000)
                    << "\n ref: " << test::escaped(want_prompt, 2000);
    }
  }
  EXPECT_GE(total, 500u);
  EXPECT_EQ(mismatches, 0u) << "of " << total;
}

}  // namespace
}  // namespace dpgate::admission
