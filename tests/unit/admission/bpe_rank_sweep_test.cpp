// The rank sweep (bpe_rank_sweep.cpp) must give the heap's ids, which are
// HuggingFace's: on the golden corpus with every piece swept, and on long,
// periodic and random pieces where the order of merges matters most (runs
// of one symbol pair up from their left end; runs of two alternate).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "admission/tokenizer/bpe_model.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

using LongMerge = BpeModel::LongMerge;

// Characters of every class the pre-tokenizer knows and of every UTF-8 length.
const std::vector<std::string> kAtoms = {"a",  "b",  "z",      "A",        "e",  " ",  "\n",     "\t",   "\r\n",
                                         "!",  "=",  "-",      "_",        ".",  "0",  "1",      "7",    "你",
                                         "の", "😀",  "\u00e9", "\u0301",   "Ж",  "ا",  "\u3000", "\x01", "ab",
                                         "aa", "th", "\u00a0", "\xc2\x85", "ー", "한", "€"};

std::vector<std::uint32_t> merged(const BpeModel& model, std::string_view piece, LongMerge strategy) {
    std::vector<std::uint32_t> ids;
    model.encodePiece(piece, ids, strategy);
    return ids;
}

void expectSweepEqualsHeap(const BpeModel& model, const std::string& piece) {
    ASSERT_EQ(merged(model, piece, LongMerge::kRankSweep), merged(model, piece, LongMerge::kHeap))
        << piece.size() << " bytes: " << test::escaped(piece, 120);
}

TEST(BpeRankSweep, TheReferenceRanksAreMonotone) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    // Otherwise the sweep is never used and long pieces fall back to the heap.
    EXPECT_TRUE(tokenizer->model().ranksAreMonotone());
}

TEST(BpeRankSweep, NonMonotoneRanksAreDetected) {
    // Byte b is token b; "a b" ranks after "ab c", which takes its result as a part.
    std::uint32_t byte_ids[256];
    for (std::uint32_t b = 0; b < 256; ++b) byte_ids[b] = b;
    const std::uint32_t ab = 256, abc = 257;
    const BpeModel monotone(byte_ids, {{'a', 'b', ab}, {ab, 'c', abc}});
    EXPECT_TRUE(monotone.ranksAreMonotone());
    const BpeModel reversed(byte_ids, {{ab, 'c', abc}, {'a', 'b', ab}});
    EXPECT_FALSE(reversed.ranksAreMonotone());
    // A sweep would never come back to rank 0 once "a b" made its pair; the
    // heap does. Not monotone, every strategy takes the heap.
    std::vector<std::uint32_t> heap, sweep;
    reversed.encodePiece("abcabc", heap, LongMerge::kHeap);
    reversed.encodePiece("abcabc", sweep, LongMerge::kRankSweep);
    EXPECT_EQ(heap, (std::vector<std::uint32_t>{abc, abc}));
    EXPECT_EQ(sweep, heap);
}

TEST(BpeRankSweep, MatchesTheReferenceIdsOnTheGoldenCorpusWithEveryPieceSwept) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    std::ifstream in(test::goldenDir() / "tokenizer_strings.jsonl");
    std::string line;
    std::size_t strings = 0;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        const std::string text = j.at("text").get<std::string>();
        std::vector<std::uint32_t> ids;
        tokenizer->addedTokens().split(
            text,
            [&](std::string_view segment) { tokenizer->encodeOrdinary(segment, nullptr, ids, LongMerge::kRankSweep); },
            [&](std::uint32_t id) { ids.push_back(id); });
        ASSERT_EQ(ids, j.at("ids").get<std::vector<std::uint32_t>>())
            << "string " << strings << ": " << test::escaped(text);
        ++strings;
    }
    EXPECT_GE(strings, 20000u);
}

TEST(BpeRankSweep, RunsOfEveryLengthMatchTheHeap) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    const BpeModel& model = tokenizer->model();
    for (const std::string& atom : kAtoms) {
        std::string piece;
        for (std::size_t length = 1; length <= 400; ++length) {
            piece += atom;
            expectSweepEqualsHeap(model, piece);
        }
        for (const std::size_t length : {1000, 4097, 20000}) {
            std::string longer;
            for (std::size_t i = 0; i < length; ++i) longer += atom;
            expectSweepEqualsHeap(model, longer);
            // With something else at either end: the run's left end decides its pairs.
            expectSweepEqualsHeap(model, "x" + longer);
            expectSweepEqualsHeap(model, longer + "." + longer);
        }
    }
}

TEST(BpeRankSweep, PeriodicAndRandomPiecesMatchTheHeap) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    const BpeModel& model = tokenizer->model();
    std::mt19937_64 rng(44);
    const auto below = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    const std::string letters = "abcdefghijklmnopqrstuvwxyz";
    const std::string base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int round = 0; round < 3000; ++round) {
        std::string piece;
        const std::size_t length = round % 100 == 0 ? 20000 + below(40000) : 1 + below(3000);
        switch (round % 4) {
            case 0: {  // a period of 2 to 6 atoms
                std::string period;
                for (std::size_t k = 2 + below(5); k > 0; --k) period += kAtoms[below(kAtoms.size())];
                while (piece.size() < length) piece += period;
                break;
            }
            case 1:  // a random word over a small alphabet
                while (piece.size() < length) piece += letters[below(round % 8 == 1 ? 3 : letters.size())];
                break;
            case 2:  // base64 or hex, as in data URLs and hashes
                while (piece.size() < length) piece += base64[below(round % 8 == 2 ? 16 : base64.size())];
                break;
            default:  // runs of random atoms with random lengths
                while (piece.size() < length) {
                    const std::string& atom = kAtoms[below(kAtoms.size())];
                    for (std::size_t k = 1 + below(40); k > 0; --k) piece += atom;
                }
                break;
        }
        expectSweepEqualsHeap(model, piece);
    }
}

// Every adversarial class through the whole counter, with the sweep on and
// off: the same ids for runs, periodic runs, random words and runs inside
// ordinary text, half a megabyte each.
TEST(BpeRankSweep, LongRunsCountAsThePlainPathCountsThem) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    TokenCounter fast(tokenizer);
    TokenCounter plain(tokenizer);
    plain.setRankSweep(false);
    const auto repeat = [](std::string_view unit, std::size_t bytes) {
        std::string out;
        while (out.size() < bytes) out += unit;
        return out;
    };
    constexpr std::size_t kBytes = 512 << 10;
    std::mt19937_64 rng(7);
    std::string random_word;
    while (random_word.size() < kBytes) random_word += static_cast<char>('a' + rng() % 26);
    std::string mixed;
    while (mixed.size() < kBytes) {
        mixed += "Ordinary words, then a run: " + repeat(kAtoms[rng() % kAtoms.size()], 1000 + rng() % 50000) + "\n";
    }
    const std::vector<std::pair<const char*, std::string>> texts = {{"letters", repeat("a", kBytes)},
                                                                    {"spaces", repeat(" ", kBytes)},
                                                                    {"digits", repeat("7", kBytes)},
                                                                    {"newlines", repeat("\n", kBytes)},
                                                                    {"punctuation", repeat("!", kBytes)},
                                                                    {"cjk", repeat("你", kBytes)},
                                                                    {"emoji", repeat("😀", kBytes)},
                                                                    {"abab", repeat("ab", kBytes)},
                                                                    {"tabs", repeat("\t", kBytes)},
                                                                    {"random word", random_word},
                                                                    {"runs in text", mixed}};
    for (const auto& [name, text] : texts) {
        std::vector<std::uint32_t> fast_ids, plain_ids;
        ASSERT_FALSE(fast.encode(text, fast_ids).has_value());
        ASSERT_FALSE(plain.encode(text, plain_ids).has_value());
        EXPECT_EQ(fast_ids, plain_ids) << name;
        EXPECT_EQ(fast.count(text).tokens, plain_ids.size()) << name;
    }
    // HuggingFace tokenizers' counts (npm tokenizers 0.23.2).
    EXPECT_EQ(fast.count(repeat("a", 1000000)).tokens, 125000u);
    EXPECT_EQ(fast.count(repeat("ab", 1000000)).tokens, 500000u);
    EXPECT_EQ(fast.count(repeat("你", 999999)).tokens, 333333u);
}

}  // namespace
}  // namespace dpgate::admission
