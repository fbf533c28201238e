// AddedTokens::split against a plain leftmost-longest scan over the token
// list: the trie, its one-edge chains compared a word at a time, and the
// first-byte filter must cut exactly where the scan does.
#include "admission/tokenizer/added_tokens.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace dpgate::admission {
namespace {

struct Piece {
    bool token;
    std::string text;  // the run of text, or the token's id as text
    bool operator==(const Piece&) const = default;
};

std::vector<Piece> splitByTrie(const AddedTokens& added, std::string_view text) {
    std::vector<Piece> out;
    added.split(
        text,
        [&](std::string_view run) {
            out.push_back({false, std::string(run)});
        },
        [&](std::uint32_t id) {
            out.push_back({true, std::to_string(id)});
        });
    return out;
}

// Leftmost-longest by brute force (every token is normalized=false, so one pass).
std::vector<Piece> splitByScan(const std::vector<AddedToken>& tokens, std::string_view text) {
    std::vector<Piece> out;
    std::string run;
    size_t pos = 0;
    while (pos < text.size()) {
        const AddedToken* best = nullptr;
        for (const AddedToken& t : tokens)
            if (text.substr(pos).starts_with(t.content) && (!best || t.content.size() > best->content.size()))
                best = &t;
        if (!best) {
            run += text[pos++];
            continue;
        }
        if (!run.empty()) out.push_back({false, std::exchange(run, {})});
        out.push_back({true, std::to_string(best->id)});
        pos += best->content.size();
    }
    if (!run.empty()) out.push_back({false, run});
    return out;
}

// Splits 20,000 random texts of up to `max_parts` fragments both ways and
// fails at the first difference; returns how many tokens the texts held.
size_t compareOnRandomTexts(const std::vector<AddedToken>& tokens, const std::vector<std::string>& fragments,
                            std::uint32_t seed, int max_parts) {
    const AddedTokens added(tokens);
    std::mt19937 random(seed);
    size_t tokens_seen = 0;
    for (int round = 0; round < 20000; ++round) {
        std::string text;
        const int parts = 1 + int(random() % unsigned(max_parts));
        for (int p = 0; p < parts; ++p) text += fragments[random() % fragments.size()];
        const std::vector<Piece> expected = splitByScan(tokens, text);
        EXPECT_EQ(splitByTrie(added, text), expected) << text;
        if (::testing::Test::HasFailure()) break;
        for (const Piece& piece : expected) tokens_seen += piece.token;
    }
    return tokens_seen;
}

TEST(AddedTokens, SplitIsLeftmostLongestOverChainsAndBranches) {
    // Shared prefixes, tokens that end inside another's chain, a long chain,
    // DeepSeek-style names with multi-byte bars, one-byte tokens.
    const std::vector<AddedToken> tokens = {
        {"<|User|>", 1},
        {"<|Assistant|>", 2},
        {"<｜User｜>", 3},
        {"<｜Assistant｜>", 4},
        {"<｜begin▁of▁sentence｜>", 5},
        {"<｜end▁of▁sentence｜>", 6},
        {"<think>", 7},
        {"</think>", 8},
        {"<a", 9},
        {"<abc", 10},
        {"<abcdefgh>", 11},
        {"x", 12},
        {"<｜place▁holder▁no▁1｜>", 13},
        {"<｜place▁holder▁no▁12｜>", 14},
    };
    std::vector<std::string> fragments = {
        "<",    ">",         "|",     "｜", "▁",        "a",     "b",      "c",  "x", "y", " ",     "think", "/",
        "User", "Assistant", "begin", "of", "sentence", "place", "holder", "no", "1", "2", "defgh", "\xef",  "\xbd"};
    for (const AddedToken& t : tokens) {
        fragments.push_back(t.content);
        fragments.push_back(t.content.substr(0, t.content.size() / 2));
        fragments.push_back(t.content.substr(0, t.content.size() - 1));
    }
    const size_t tokens_seen = compareOnRandomTexts(tokens, fragments, 18, 12);
    EXPECT_GT(tokens_seen, 10000u);  // the texts do hold tokens, cut at every kind of place
}

TEST(AddedTokens, BranchesOfMoreThanEightEdgesAreSearchedByBinarySearch) {
    // DeepSeek's 800-odd placeholders branch ten ways at each digit, and
    // eleven one-byte tokens give the root more than eight edges too: both
    // take the binary search, where smaller branches take the linear scan.
    std::vector<AddedToken> tokens;
    std::uint32_t id = 0;
    for (int n = 0; n < 130; ++n) tokens.push_back({"<｜place▁holder▁no▁" + std::to_string(n) + "｜>", id++});
    for (char c = 'a'; c <= 'k'; ++c) tokens.push_back({std::string(1, c), id++});
    tokens.push_back({"<｜User｜>", id++});
    const std::vector<std::string> fragments = {
        "<｜place▁holder▁no▁", "｜>", "<｜", "<", "0", "1", "2", "5", "9", "12", "a", "k", "l", "z", " ", "<｜User｜>"};
    const size_t tokens_seen = compareOnRandomTexts(tokens, fragments, 1018, 10);
    EXPECT_GT(tokens_seen, 10000u);
}

TEST(AddedTokens, TextEndingInsideAChainIsText) {
    const AddedTokens added({{"<｜begin▁of▁sentence｜>", 5}, {"<｜User｜>", 3}});
    for (std::string_view text : {"<｜begin▁of▁sent", "<｜begin▁of▁sentence｜", "<｜", "<", "<｜Use"}) {
        const std::vector<Piece> pieces = splitByTrie(added, text);
        ASSERT_EQ(pieces.size(), 1u) << text;
        EXPECT_EQ(pieces[0], (Piece{false, std::string(text)}));
    }
}

}  // namespace
}  // namespace dpgate::admission
