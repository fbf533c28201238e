// The count caches stay within their byte bound, and
// eviction never changes a count.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "admission/tokenizer/segment_cache.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "admission/tokenizer/word_cache.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

// A fixed pseudo-random sequence, so every run builds the same texts.
struct XorShift {
    std::uint64_t state;
    std::uint64_t operator()() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    }
};

TEST(SegmentCache, AccountedBytesNeverExceedTheBoundAndOldEntriesAreEvicted) {
    constexpr std::size_t kBound = 64 * 1024;
    SegmentCache cache(kBound);
    std::size_t max_seen = 0;
    const std::string segment(40, 'x');  // only the length is part of the key besides the hash
    for (std::uint64_t i = 1; i <= 200000; ++i) {
        const Hash128 hash{i * 0x9e3779b97f4a7c15ull, i};
        ASSERT_FALSE(cache.find(segment, hash).has_value());
        cache.insert(segment, hash, i);
        max_seen = std::max(max_seen, cache.memoryBytes());
        ASSERT_LE(cache.memoryBytes(), kBound) << "after " << i << " inserts";
    }
    // The bound was reached (not merely respected by staying small) ...
    EXPECT_GT(max_seen, kBound / 2);
    EXPECT_GT(cache.rotations(), 0u);
    // ... the first entries are gone, the latest are there with their values.
    EXPECT_FALSE(cache.find(segment, Hash128{0x9e3779b97f4a7c15ull, 1}).has_value());
    const std::uint64_t last = 200000;
    EXPECT_EQ(cache.find(segment, Hash128{last * 0x9e3779b97f4a7c15ull, last}), last);
    // Same hash, other length: another segment.
    EXPECT_FALSE(cache.find(std::string(41, 'x'), Hash128{last * 0x9e3779b97f4a7c15ull, last}).has_value());
}

TEST(SegmentCache, HitInThePreviousGenerationSurvivesTheNextRotation) {
    SegmentCache cache(std::size_t{1} << 20, 8);  // 4 entries per generation
    const std::string segment = "a segment of text";
    auto hash = [](std::uint64_t i) { return Hash128{i * 0xc2b2ae3d27d4eb4full + 1, i}; };
    for (std::uint64_t i = 0; i < 4; ++i) cache.insert(segment, hash(i), i);
    for (std::uint64_t i = 4; i < 8; ++i) cache.insert(segment, hash(i), i);  // 0..3 now previous
    // A hit in the previous generation copies 0 into the current one (which
    // rotates: 4..7 become previous, 1..3 are dropped).
    ASSERT_EQ(cache.find(segment, hash(0)), 0u);
    EXPECT_FALSE(cache.find(segment, hash(1)).has_value());
    for (std::uint64_t i = 8; i < 12; ++i) cache.insert(segment, hash(i), i);  // rotates again: 4..7 dropped
    EXPECT_EQ(cache.find(segment, hash(0)), 0u);
    EXPECT_FALSE(cache.find(segment, hash(4)).has_value());
    EXPECT_EQ(cache.find(segment, hash(11)), 11u);
    EXPECT_LE(cache.size(), 8u);
}

TEST(SegmentCache, TooSmallABoundCachesNothing) {
    SegmentCache cache(16);
    cache.insert("some segment", Hash128{1, 2}, 3);
    EXPECT_FALSE(cache.find("some segment", Hash128{1, 2}).has_value());
    EXPECT_EQ(cache.memoryBytes(), 0u);
}

TEST(WordCache, MemoryIsFixedAtConstructionWhateverIsInserted) {
    WordCache cache(256);
    const std::size_t bytes = WordCache::bytesFor(256);
    EXPECT_EQ(cache.memoryBytes(), bytes);
    std::vector<std::uint32_t> ids(64, 7);
    for (std::uint64_t i = 0; i < 10000; ++i) {
        // Long pieces with many ids fill the arenas long before the entries.
        const std::string piece = std::to_string(i) + std::string(50, 'w');
        const WordCache::Key key = WordCache::keyOf(piece, piece.size());
        cache.insert(piece, key, ids.data(), static_cast<std::uint32_t>(1 + i % 64));
        ASSERT_EQ(cache.memoryBytes(), bytes) << "after " << i << " inserts";
        std::uint32_t count = 0;
        ASSERT_NE(cache.find(piece, key, count), nullptr);
        ASSERT_EQ(count, 1 + i % 64);
    }
}

// A key is read sixteen bytes at a time and masked to the piece: the bytes
// after a piece, and whether it ends its text, never change it; pieces that
// differ in any byte or only in length are different entries.
TEST(WordCache, KeysDependOnThePieceAloneAndTellEveryPieceApart) {
    XorShift next{18};
    WordCache cache(4096);
    std::vector<std::string> pieces;
    for (std::size_t length = 1; length <= 40; ++length) {
        for (int variant = 0; variant < 20; ++variant) {
            std::string piece;
            // Few byte values, zero among them, so pieces share prefixes and
            // padding-like bytes.
            for (std::size_t i = 0; i < length; ++i) piece += "\0ab\xff"[next() % 4];
            if (variant == 0) piece.assign(length, '\0');
            pieces.push_back(piece);
        }
    }
    std::sort(pieces.begin(), pieces.end());
    pieces.erase(std::unique(pieces.begin(), pieces.end()), pieces.end());
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const std::string& piece = pieces[i];
        const WordCache::Key alone = WordCache::keyOf(piece, piece.size());
        for (const char after : {'\0', 'a', '\xff'}) {
            const std::string text = piece + std::string(32, after);
            const WordCache::Key in_text =
                WordCache::keyOf(std::string_view(text).substr(0, piece.size()), text.size());
            ASSERT_EQ(in_text.word0, alone.word0);
            ASSERT_EQ(in_text.word1, alone.word1);
            ASSERT_EQ(in_text.hash, alone.hash);
        }
        const auto id = static_cast<std::uint32_t>(i);
        cache.insert(piece, alone, &id, 1);
    }
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const std::string text = pieces[i] + "trailing bytes past the piece";
        const std::string_view piece = std::string_view(text).substr(0, pieces[i].size());
        std::uint32_t count = 0;
        const std::uint32_t* ids = cache.find(piece, WordCache::keyOf(piece, text.size()), count);
        ASSERT_NE(ids, nullptr) << i;
        ASSERT_EQ(count, 1u);
        ASSERT_EQ(ids[0], i);
    }
    std::uint32_t count = 0;
    const std::string absent(17, 'c');
    EXPECT_EQ(cache.find(absent, WordCache::keyOf(absent, absent.size()), count), nullptr);
}

// Many long conversations interleaved through one counter whose bound holds
// a fraction of them: every count equals a fresh counter's, the accounting
// never passes the bound, and both hits and evictions happen.
TEST(TokenCounter, CountsStayExactWhileTheBoundEvicts) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    constexpr std::size_t kBound = 96 * 1024;
    TokenCounter bounded(tokenizer, TokenCounterLimits{.cache_bytes = kBound});
    constexpr int kConversations = 40;
    std::vector<std::string> prompts(kConversations, "<｜begin▁of▁sentence｜>You are terse.");
    XorShift next{12345};
    const char* words[] = {"count", "token", "naïve", "日本語", "Ünïcode", "  ", "\n", "x=1;", "base64:QUJD", "42"};
    for (int turn = 0; turn < 30; ++turn) {
        for (int c = 0; c < kConversations; ++c) {
            std::string& p = prompts[c];
            p += "<｜User｜>conversation " + std::to_string(c) + " turn " + std::to_string(turn) + ":";
            for (int w = 0; w < 60; ++w) p += words[next() % std::size(words)];
            p += "<｜Assistant｜>";
            const TokenCount got = bounded.count(p);
            TokenCounter fresh(tokenizer);
            const TokenCount want = fresh.count(p);
            ASSERT_TRUE(got.ok && want.ok);
            ASSERT_EQ(got.tokens, want.tokens) << "conversation " << c << " turn " << turn;
            ASSERT_LE(bounded.cacheBytes(), kBound);
            p += "an answer for " + std::to_string(c) + "<｜end▁of▁sentence｜>";
        }
    }
    EXPECT_GT(bounded.segmentCache().hits(), 0u);
    EXPECT_GT(bounded.segmentCache().rotations(), 0u);
}

}  // namespace
}  // namespace dpgate::admission
