#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dpgate::admission
