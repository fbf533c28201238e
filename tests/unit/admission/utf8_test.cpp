#include <gtest/gtest.h>

#include <random>
#include <string_view>
#include <vector>

#include "admission/tokenizer/token_counter.hpp"
#include "admission/tokenizer/utf8.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
    EXPECT_EQ(findInvalidUtf8(""), kValidUtf8);
    EXPECT_EQ(findInvalidUtf8("plain ascii text that is longer than eight bytes"), kValidUtf8);
    EXPECT_EQ(findInvalidUtf8("é 你好 😀 \xf4\x8f\xbf\xbf \xed\x9f\xbf"), kValidUtf8);  // U+10FFFF, U+D7FF
}

TEST(Utf8, RefusesEveryIllFormedShape) {
    EXPECT_EQ(findInvalidUtf8("abc\xff"), 3u);
    EXPECT_EQ(findInvalidUtf8("\x80"), 0u);                  // lone continuation
    EXPECT_EQ(findInvalidUtf8("\xc0\xaf"), 0u);              // overlong '/'
    EXPECT_EQ(findInvalidUtf8("\xe0\x80\xaf"), 0u);          // overlong, 3 bytes
    EXPECT_EQ(findInvalidUtf8("\xf0\x80\x80\xaf"), 0u);      // overlong, 4 bytes
    EXPECT_EQ(findInvalidUtf8("12345678\xed\xa0\x80"), 8u);  // U+D800 encoded (CESU / WTF-8)
    EXPECT_EQ(findInvalidUtf8("\xf4\x90\x80\x80"), 0u);      // above U+10FFFF
    EXPECT_EQ(findInvalidUtf8("ok\xe4\xbd"), 2u);            // truncated at end
    EXPECT_EQ(findInvalidUtf8("\xe4\x41\xa0"), 0u);          // continuation missing
}

TEST(Utf8, CounterRefusesInvalidTextWithOffset) {
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    TokenCounter counter(tokenizer);
    const TokenCount count = counter.count("hello \xed\xa0\x80 world");
    EXPECT_FALSE(count.ok);
    EXPECT_EQ(count.error, "input is not valid UTF-8 (byte offset 6)");
    std::vector<std::uint32_t> ids;
    EXPECT_TRUE(counter.encode("\xc3", ids).has_value());
    EXPECT_TRUE(ids.empty());
}

// The fast path (utf8_ascii_runs.hpp) finds the same first ill-formed byte
// as the plain check, on strings of ASCII runs, CJK characters (whose runs
// it skips), the lead bytes it hands back (0xe0, 0xed) and every ill-formed
// shape, at every alignment against its eight-byte words.
TEST(Utf8, TheFastPathFindsWhatThePlainCheckFinds) {
    const std::vector<std::string_view> atoms = {"a",
                                                 "abcdefgh",
                                                 " ",
                                                 "\x7f",
                                                 "\x00",
                                                 "é",
                                                 "你",
                                                 "好世界",
                                                 "\xe0\xa0\x80",
                                                 "\xed\x9f\xbf",
                                                 "😀",
                                                 "\xf4\x8f\xbf\xbf",
                                                 "\x80",
                                                 "\xff",
                                                 "\xc0\xaf",
                                                 "\xe0\x80\xaf",
                                                 "\xed\xa0\x80",
                                                 "\xf4\x90\x80\x80",
                                                 "\xe4\xbd",
                                                 "\xe4\x41",
                                                 "\xf0\x9f",
                                                 "\xc3"};
    std::mt19937 rng(8);
    std::uniform_int_distribution<std::size_t> pick(0, atoms.size() - 1);
    std::uniform_int_distribution<int> length(0, 40);
    for (int round = 0; round < 100000; ++round) {
        std::string text;
        for (int k = length(rng); k > 0; --k) {
            // Mostly well-formed, so the fast path has runs to skip.
            const std::size_t atom = pick(rng);
            text += atom >= 12 && rng() % 4 != 0 ? atoms[atom % 7] : atoms[atom];
        }
        ASSERT_EQ(findInvalidUtf8(text, true), findInvalidUtf8(text, false)) << test::escaped(text);
    }
}

}  // namespace
}  // namespace dpgate::admission
