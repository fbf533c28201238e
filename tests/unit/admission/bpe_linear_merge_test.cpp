// The linear scan for short pieces (bpe_linear_merge.cpp) must give the
// heap's ids, which are HuggingFace's: on every piece of the golden corpus
// and on short pieces of every class, up to the longest the scan takes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "admission/tokenizer/bpe_model.hpp"
#include "admission/tokenizer/deepseek_v3_splitter.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

using LongMerge = BpeModel::LongMerge;
using ShortMerge = BpeModel::ShortMerge;

std::vector<std::uint32_t> merged(const BpeModel& model, std::string_view piece, ShortMerge short_merge) {
    std::vector<std::uint32_t> ids;
    model.encodePiece(piece, ids, LongMerge::kHeap, short_merge);
    return ids;
}

TEST(BpeLinearMerge, EveryPieceOfTheGoldenCorpusMergesAsByTheHeap) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    const BpeModel& model = tokenizer->model();
    std::ifstream in(test::goldenDir() / "tokenizer_strings.jsonl");
    ASSERT_TRUE(in);
    std::size_t pieces = 0;
    std::string line;
    while (std::getline(in, line)) {
        const std::string text = nlohmann::json::parse(line).at("text").get<std::string>();
        std::vector<std::uint32_t> ends;
        splitDeepSeekV3(text, ends);
        std::uint32_t start = 0;
        for (const std::uint32_t end : ends) {
            const std::string_view piece = std::string_view(text).substr(start, end - start);
            start = end;
            ASSERT_EQ(merged(model, piece, ShortMerge::kLinear), merged(model, piece, ShortMerge::kHeap))
                << test::escaped(std::string(piece), 120);
            ++pieces;
        }
    }
    EXPECT_GT(pieces, 10000u);
}

TEST(BpeLinearMerge, ShortPiecesOfEveryClassMergeAsByTheHeap) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    const BpeModel& model = tokenizer->model();
    const std::vector<std::string> atoms = {"a", "b", "e", "t",  "h",  " ", "\n", "\t",     "!", "=",    "-",  "_",
                                            ".", "0", "7", "你", "の", "😀", "é",  "\u0301", "Ж", "\x01", "ab", "th"};
    std::mt19937_64 rng(64);
    for (int round = 0; round < 200000; ++round) {
        std::string piece;
        // Up to the scan's limit in symbols, and a little beyond (the heap takes those either way).
        const std::size_t length = 1 + rng() % (BpeModel::kLinearMergeMax + 8);
        while (piece.size() < length) piece += atoms[rng() % atoms.size()];
        ASSERT_EQ(merged(model, piece, ShortMerge::kLinear), merged(model, piece, ShortMerge::kHeap))
            << test::escaped(piece, 120);
    }
}

// Through the whole counter, with the scan on and off: the same counts.
TEST(BpeLinearMerge, TheCounterCountsAlikeEitherWay) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    TokenCounter linear(tokenizer);
    TokenCounter heap(tokenizer);
    linear.setLinearMerge(true);
    heap.setLinearMerge(false);
    std::ifstream in(test::goldenDir() / "tokenizer_strings.jsonl");
    ASSERT_TRUE(in);
    std::string line;
    while (std::getline(in, line)) {
        const std::string text = nlohmann::json::parse(line).at("text").get<std::string>();
        const TokenCount a = linear.count(text);
        const TokenCount b = heap.count(text);
        ASSERT_EQ(a.ok, b.ok);
        ASSERT_EQ(a.tokens, b.tokens) << test::escaped(text, 120);
    }
}

}  // namespace
}  // namespace dpgate::admission
