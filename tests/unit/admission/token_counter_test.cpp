#include <gtest/gtest.h>

#include "admission/tokenizer/token_counter.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

TEST(TokenCounter, SpecialTokensInsideTextAreOneTokenEach) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    TokenCounter counter(tokenizer);
    std::vector<std::uint32_t> ids;
    ASSERT_FALSE(counter.encode("Hello <｜User｜> world", ids).has_value());
    EXPECT_EQ(ids, (std::vector<std::uint32_t>{19923, 223, 128803, 2058}));  // from npm tokenizers
    EXPECT_EQ(counter.count("<｜begin▁of▁sentence｜><｜User｜>").tokens, 2u);
    EXPECT_EQ(counter.count("").tokens, 0u);
}

TEST(TokenCounter, NextTurnOnlyCountsNewSegments) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    TokenCounter counter(tokenizer);
    std::string history = "<｜begin▁of▁sentence｜>";
    for (int turn = 0; turn < 20; ++turn) {
        history += "<｜User｜>";
        history += std::string(1000, 'a' + turn % 26) + " question " + std::to_string(turn);
        history +=
            "<｜Assistant｜>answer " + std::to_string(turn) + std::string(500, ' ') + "done<｜end▁of▁sentence｜>";
    }
    const std::string turn1 = history + "<｜User｜>" + std::string(2000, 'q') + "<｜Assistant｜>";
    const TokenCount first = counter.count(turn1);
    const std::uint64_t misses_before = counter.segmentCache().misses();
    const std::string turn2 = turn1 + "reply" + std::string(300, '!') + "<｜end▁of▁sentence｜><｜User｜>" +
                              std::string(400, 'z') + "<｜Assistant｜>";
    const TokenCount second = counter.count(turn2);
    ASSERT_TRUE(first.ok && second.ok);
    // Only the two new long segments miss; everything before hits.
    EXPECT_EQ(counter.segmentCache().misses() - misses_before, 2u);
    TokenCounter fresh(tokenizer);
    EXPECT_EQ(fresh.count(turn2).tokens, second.tokens);
}

TEST(TokenCounter, SegmentCacheStaysBounded) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    TokenCounter counter(
        tokenizer,
        TokenCounterLimits{.word_cache_entries = 64, .segment_cache_entries = 16, .min_cached_segment_bytes = 1});
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(counter.count("segment number " + std::to_string(i)).ok);
    EXPECT_LE(counter.segmentCache().size(), 16u);
}

}  // namespace
}  // namespace dpgate::admission
