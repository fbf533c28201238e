#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
    const CliRun r = run({"--tokenizer", test::tokenizerDir().string(), "--jsonl"},
                         "\"Hello\"\n"
                         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello "
                         "world\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}\n"
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
    const CliRun gone = run({"--tokenizer", test::tokenizerDir().string(), "--template", "deepseek-v3"}, "");
    EXPECT_EQ(gone.code, 2);
    EXPECT_NE(gone.err.find("--chat-template"), std::string::npos);
    EXPECT_EQ(
        run({"--tokenizer", test::tokenizerDir().string(), "--jsonl", "--chat-template", "/nonexistent.jinja"}, "")
            .code,
        1);
    const CliRun bad_utf8 = run({"--tokenizer", test::tokenizerDir().string()}, "ok \xff");
    EXPECT_EQ(bad_utf8.code, 1);
    EXPECT_NE(bad_utf8.err.find("not valid UTF-8"), std::string::npos);
}

TEST(TokensCli, TokenizerFileOrDirectoryAndShowPrompt) {
    const std::string body = R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"hi"}]})";
    for (const std::string& path :
         {test::tokenizerDir().string(), (test::tokenizerDir() / "tokenizer.json").string()}) {
        const CliRun r = run({"--tokenizer", path, "--jsonl", "--show-prompt"}, body + "\n");
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(
            r.out,
            "{\"prompt_tokens\":5,\"images\":0,\"prompt\":\"<｜begin▁of▁sentence｜>S<｜User｜>hi<｜Assistant｜>\"}\n");
    }
}

TEST(TokensCli, ChatTemplateFileReplacesTheModelsOwnAndItsRefusalIsAnErrorLine) {
    const std::filesystem::path file = std::filesystem::temp_directory_path() / "dpgate_tokens_cli_test.jinja";
    {
        std::ofstream out(file);
        out << "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}"
               "[{{ m.role }}]{{ m.content }}{% endfor %}";
    }
    const CliRun r = run(
        {"--tokenizer", test::tokenizerDir().string(), "--chat-template", file.string(), "--jsonl", "--show-prompt"},
        R"({"messages":[{"role":"user","content":"hi"}]})"
        "\n"
        R"({"messages":[{"role":"tool","content":"x"}]})"
        "\n");
    std::filesystem::remove(file);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "{\"prompt_tokens\":4,\"images\":0,\"prompt\":\"[user]hi\"}\n{\"error\":\"no tools here\"}\n");
}

}  // namespace
}  // namespace dpgate::admission
