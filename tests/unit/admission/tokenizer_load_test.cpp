// Load accepts exactly the supported tokenizer.json family and names what it
// refuses. Uses a tiny synthetic tokenizer (256 byte tokens + a few merges).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "admission/tokenizer/deepseek_v3_splitter.hpp"
#include "admission/tokenizer/token_counter.hpp"

namespace dpgate::admission {
namespace {

std::string byteChar(unsigned b) {
    auto printable = [](unsigned x) {
        return (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff);
    };
    unsigned cp = b;
    if (!printable(b)) {
        unsigned shifted = 0;
        for (unsigned x = 0; x < b; ++x) shifted += printable(x) ? 0 : 1;
        cp = 0x100 + shifted;
    }
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
    return out;
}

nlohmann::json tinyTokenizer() {
    nlohmann::json vocab = nlohmann::json::object();
    for (unsigned b = 0; b < 256; ++b) vocab[byteChar(b)] = b;
    vocab["ab"] = 256;
    vocab["abc"] = 257;
    vocab["Ġa"] = 258;
    nlohmann::json split_steps = nlohmann::json::array();
    for (const auto pattern : kDeepSeekV3SplitPatterns) {
        split_steps.push_back({{"type", "Split"},
                               {"pattern", {{"Regex", std::string(pattern)}}},
                               {"behavior", "Isolated"},
                               {"invert", false}});
    }
    split_steps.push_back(
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
    return {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens",
         {{{"id", 300},
           {"content", "<|x|>"},
           {"single_word", false},
           {"lstrip", false},
           {"rstrip", false},
           {"normalized", false},
           {"special", true}}}},
        {"normalizer", {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}}},
        {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", split_steps}}},
        {"post_processor",
         {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"vocab", vocab},
          // Both merge spellings: "a b" strings and ["a","b"] pairs.
          {"merges", {"a b", nlohmann::json::array({"ab", "c"}), "Ġ a"}}}},
    };
}

std::string loadError(const nlohmann::json& j) {
    const TokenizerLoad loaded = Tokenizer::fromJson(j.dump());
    return loaded.tokenizer ? std::string() : loaded.error;
}

TEST(TokenizerLoad, TinyTokenizerEncodesWithBothMergeForms) {
    const TokenizerLoad loaded = Tokenizer::fromJson(tinyTokenizer().dump());
    ASSERT_NE(loaded.tokenizer, nullptr) << loaded.error;
    TokenCounter counter(loaded.tokenizer);
    std::vector<std::uint32_t> ids;
    ASSERT_FALSE(counter.encode("abc a<|x|>ab", ids).has_value());
    EXPECT_EQ(ids, (std::vector<std::uint32_t>{257, 258, 300, 256}));
}

TEST(TokenizerLoad, RefusesUnsupportedComponentsByName) {
    auto with = [](auto mutate) {
        nlohmann::json j = tinyTokenizer();
        mutate(j);
        return loadError(j);
    };
    EXPECT_NE(with([](auto& j) {
                  j["normalizer"] = {{"type", "NFC"}};
              }).find("unsupported normalizer: NFC"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) {
                  j["pre_tokenizer"]["pretokenizers"][2]["pattern"]["Regex"] = "\\s+";
              }).find("unsupported pre_tokenizer Split regex 2"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) {
                  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
              }).find("Split behavior: Removed"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) { j["pre_tokenizer"]["pretokenizers"][3]["use_regex"] = true; }).find("use_regex"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) {
                  j["pre_tokenizer"] = {{"type", "Whitespace"}};
              }).find("unsupported pre_tokenizer: Whitespace"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) { j["model"]["type"] = "WordPiece"; }).find("unsupported model"), std::string::npos);
    EXPECT_NE(with([](auto& j) { j["model"]["dropout"] = 0.1; }).find("dropout"), std::string::npos);
    EXPECT_NE(with([](auto& j) { j["model"]["ignore_merges"] = true; }).find("ignore_merges"), std::string::npos);
    EXPECT_NE(with([](auto& j) { j["model"]["byte_fallback"] = true; }).find("byte_fallback"), std::string::npos);
    EXPECT_NE(with([](auto& j) { j["added_tokens"][0]["lstrip"] = true; }).find("lstrip=true"), std::string::npos);
    EXPECT_NE(with([](auto& j) {
                  j["post_processor"] = {{"type", "TemplateProcessing"}};
              }).find("post_processor: TemplateProcessing"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) { j["truncation"] = {{"max_length", 5}}; }).find("truncation"), std::string::npos);
    EXPECT_NE(with([](auto& j) { j["model"]["merges"].push_back("a zz"); }).find("not in vocab: zz"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) {
                  j["model"]["merges"].push_back(nlohmann::json::array({"a", "b", "c"}));
              }).find("does not have 2 entries"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) { j["model"]["merges"].push_back("z z"); }).find("result not in vocab: zz"),
              std::string::npos);
    EXPECT_NE(with([](auto& j) { j["model"]["vocab"].erase("z"); }).find("byte 122"), std::string::npos);
    EXPECT_EQ(loadError(tinyTokenizer()), "");
}

TEST(TokenizerLoad, MissingFileAndBadJsonAreErrors) {
    EXPECT_NE(Tokenizer::load("/nonexistent/tokenizer.json").error.find("cannot read"), std::string::npos);
    EXPECT_NE(Tokenizer::fromJson("{\"model\": [").error.find("invalid JSON"), std::string::npos);
}

}  // namespace
}  // namespace dpgate::admission
