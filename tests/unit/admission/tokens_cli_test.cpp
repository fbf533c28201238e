#include <gtest/gtest.h>

#include <sstream>

#include "admission/tokens_cli.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun run(std::vector<std::string> args, const std::string& input) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::istringstream in(input);
  std::ostringstream out, err;
  const int code = runTokensCli(static_cast<int>(argv.size()), argv.data(), in, out, err);
  return {code, out.str(), err.str()};
}

TEST(TokensCli, RawTextPrintsTokens) {
  const CliRun r = run({"--tokenizer", test::tokenizerDir().string()}, "Hello <｜User｜> world");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"tokens\":4}\n");
}

TEST(TokensCli, JsonlAnswersEveryLineAndSurvivesBadOnes) {
  const CliRun r = run({"--tokenizer", test::tokenizerDir().string(), "--template", "deepseek-v3", "--jsonl"},
                       "\"Hello\"\n"
                       "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello world\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}\n"
                       "\"\\ud800\"\n"
                       "42\n"
                       "\"world\"\n");
  EXPECT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);) got.push_back(line);
  ASSERT_EQ(got.size(), 5u) << r.out;
  EXPECT_EQ(got[0], "{\"tokens\":1}");
  EXPECT_EQ(got[1], "{\"prompt_tokens\":5,\"images\":1}");
  EXPECT_NE(got[2].find("{\"error\":"), std::string::npos);
  EXPECT_NE(got[2].find("surrogate"), std::string::npos);
  EXPECT_NE(got[3].find("{\"error\":"), std::string::npos);
  EXPECT_EQ(got[4], "{\"tokens\":1}");
}

TEST(TokensCli, FatalErrorsExitNonZero) {
  EXPECT_EQ(run({}, "").code, 2);
  EXPECT_EQ(run({"--tokenizer", "/nonexistent"}, "").code, 1);
  EXPECT_EQ(run({"--tokenizer", test::tokenizerDir().string(), "--template", "nope"}, "").code, 2);
  const CliRun bad_utf8 = run({"--tokenizer", test::tokenizerDir().string()}, "ok \xff");
  EXPECT_EQ(bad_utf8.code, 1);
  EXPECT_NE(bad_utf8.err.find("not valid UTF-8"), std::string::npos);
}

}  // namespace
}  // namespace dpgate::admission
