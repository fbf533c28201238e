#include <gtest/gtest.h>

#include "admission/tokenizer/token_counter.hpp"
#include "test_support.hpp"

#include <memory>
#include <string>
#include <thread>
#include <vector>

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

// Two workers' counters and the cache they share.
struct TwoWorkers {
    std::shared_ptr<SharedSegmentCache> shared;
    TokenCounter a, b;
};
TwoWorkers twoWorkers(const std::shared_ptr<const Tokenizer>& tokenizer, std::size_t shared_bytes) {
    auto shared = std::make_shared<SharedSegmentCache>(shared_bytes);
    return {shared, TokenCounter(tokenizer, TokenCounterLimits{.shared_segments = shared}),
            TokenCounter(tokenizer, TokenCounterLimits{.shared_segments = shared})};
}

// The next turn of a conversation on another worker: that worker's counter
// never saw the conversation, and finds its segments in the shared cache.
TEST(TokenCounter, AnotherCountersSegmentsComeFromTheSharedCache) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    auto [shared, worker_a, worker_b] = twoWorkers(tokenizer, std::size_t{8} << 20);
    std::string history = "<｜begin▁of▁sentence｜>";
    for (int turn = 0; turn < 30; ++turn)
        history += "<｜User｜>question " + std::to_string(turn) + std::string(800, 'a' + turn % 26) +
                   "<｜Assistant｜>answer " + std::to_string(turn) + std::string(300, '.') + "<｜end▁of▁sentence｜>";
    const std::string turn1 = history + "<｜User｜>" + std::string(100, 'q') + "<｜Assistant｜>";
    const TokenCount first = worker_a.count(turn1);
    ASSERT_TRUE(first.ok);
    EXPECT_EQ(shared->misses(), 61u);  // every long segment, looked up once
    EXPECT_EQ(shared->hits(), 0u);

    const std::string turn2 = turn1 + "the reply" + std::string(200, '!') + "<｜end▁of▁sentence｜><｜User｜>" +
                              std::string(400, 'z') + "<｜Assistant｜>";
    const TokenCount second = worker_b.count(turn2);
    ASSERT_TRUE(second.ok);
    // Worker B's own cache missed every long segment; all but the two new
    // ones were in the shared cache.
    EXPECT_EQ(worker_b.segmentCache().misses(), 63u);
    EXPECT_EQ(shared->hits(), 61u);
    EXPECT_EQ(shared->misses(), 61u + 2u);
    TokenCounter fresh(tokenizer);
    EXPECT_EQ(fresh.count(turn2).tokens, second.tokens);
    EXPECT_EQ(fresh.count(turn1).tokens, first.tokens);

    // B now holds them itself: a third turn there takes no shared lookup for them.
    const std::uint64_t shared_lookups = shared->hits() + shared->misses();
    ASSERT_TRUE(worker_b.count(turn2 + "a new answer, long enough to be cached").ok);
    EXPECT_EQ(shared->hits() + shared->misses(), shared_lookups + 1);  // only the new last segment
}

TEST(TokenCounter, InvalidUtf8IsRefusedEvenWhenAnotherCounterSawTheValidText) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    auto [shared, a, b] = twoWorkers(tokenizer, std::size_t{1} << 20);
    ASSERT_TRUE(a.count(std::string(100, 'x')).ok);
    std::string bad(100, 'x');
    bad[50] = '\xff';  // same length, another hash: a miss, checked, refused
    const TokenCount refused = b.count(bad);
    EXPECT_FALSE(refused.ok);
    EXPECT_NE(refused.error.find("byte offset 50"), std::string::npos) << refused.error;
}

TEST(SharedSegmentCache, ManyThreadsStayConsistentAndBounded) {
    constexpr std::size_t kBound = std::size_t{2} << 20;
    SharedSegmentCache shared(kBound);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&shared, t] {
            for (int i = 0; i < 40'000; ++i) {
                const std::string segment = "segment " + std::to_string((i * 7 + t) % 50'000);
                const Hash128 hash = hash128(segment);
                if (const auto cached = shared.find(segment, hash)) {
                    ASSERT_EQ(*cached, segment.size() * 3);  // whoever inserted it, the same count
                } else {
                    shared.insert(segment, hash, segment.size() * 3);
                }
            }
        });
    for (std::thread& thread : threads) thread.join();
    EXPECT_GT(shared.hits(), 0u);
    EXPECT_EQ(shared.hits() + shared.misses(), 160'000u);
    EXPECT_LE(shared.memoryBytes(), kBound);
    EXPECT_GT(shared.memoryBytes(), 0u);
}

}  // namespace
}  // namespace dpgate::admission
