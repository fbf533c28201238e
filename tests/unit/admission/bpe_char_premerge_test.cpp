// The per-character pre-merge shortcut (bpe_char_premerge.cpp) must give the
// ids the plain byte-level merge gives: every CJK/kana code point it covers,
// alone and between random neighbours.
#include "admission/tokenizer/bpe_model.hpp"
#include "admission/tokenizer/tokenizer.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <random>

namespace dpgate::admission {
namespace {

void appendUtf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

TEST(BpeCharPremerge, MatchesTheByteLevelMergeOverTheWholeRange) {
    auto tokenizer = test::referenceTokenizer();
    ASSERT_TRUE(tokenizer);
    const BpeModel& model = tokenizer->model();
    if (!fastPathOn(FastPath::bpe_char_premerge)) {
        // The model was built as its plain twin: every piece starts from its bytes.
        EXPECT_EQ(model.premergedCharCount(), 0u);
        GTEST_SKIP() << "DPGATE_PLAIN turned bpe_char_premerge off: no shortcut to compare with the bytes";
    }
    EXPECT_GT(model.premergedCharCount(), 10000u) << "the shortcut should cover most CJK characters";
    std::mt19937 random(20261202);
    std::uniform_int_distribution<char32_t> cjk(0x3040, 0x9FA5);
    std::vector<std::uint32_t> fast, slow;
    size_t checked = 0;
    for (char32_t cp = 0x3040; cp <= 0x9FA5; ++cp) {
        for (int neighbours = 0; neighbours < 2; ++neighbours) {
            std::string piece;
            if (neighbours) appendUtf8(piece, cjk(random));
            appendUtf8(piece, cp);
            if (neighbours) appendUtf8(piece, cjk(random));
            fast.clear();
            slow.clear();
            model.encodePiece(piece, fast);
            model.encodePieceFromBytes(piece, slow);
            ASSERT_EQ(fast, slow) << "U+" << std::hex << uint32_t(cp) << " in " << test::escaped(piece);
            ++checked;
        }
    }
    EXPECT_EQ(checked, 2u * (0x9FA5 - 0x3040 + 1));
}

}  // namespace
}  // namespace dpgate::admission
