// The hand-written splitter on the cases each regex alternative exists for.
#include <gtest/gtest.h>

#include <random>

#include "admission/tokenizer/deepseek_v3_splitter.hpp"

namespace dpgate::admission {
namespace {

std::vector<std::string> split(std::string_view text) {
    std::vector<std::uint32_t> ends;
    splitDeepSeekV3(text, ends);
    std::vector<std::string> pieces;
    std::uint32_t start = 0;
    for (const std::uint32_t end : ends) {
        pieces.emplace_back(text.substr(start, end - start));
        start = end;
    }
    return pieces;
}

using Pieces = std::vector<std::string>;

TEST(DeepSeekV3Splitter, NumbersGoInThrees) {
    EXPECT_EQ(split("1234567"), (Pieces{"123", "456", "7"}));
    EXPECT_EQ(split("ab12cd"), (Pieces{"ab", "12", "cd"}));
    EXPECT_EQ(split("١٢٣٤"), (Pieces{"١٢٣", "٤"}));  // Arabic-Indic digits are \p{N}
}

TEST(DeepSeekV3Splitter, CjkRunsAreIsolatedBeforeWords) {
    EXPECT_EQ(split(" 你好世界"), (Pieces{" ", "你好世界"}));
    EXPECT_EQ(split("abc日本"), (Pieces{"abc", "日本"}));
}

TEST(DeepSeekV3Splitter, WordAlternatives) {
    EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
    EXPECT_EQ(split(".NET x"), (Pieces{".NET", " x"}));  // punct + ASCII letters
    EXPECT_EQ(split("a, b!!\n\nc"), (Pieces{"a", ",", " b", "!!\n\n", "c"}));
    EXPECT_EQ(split("e\u0301x"), (Pieces{"e\u0301x"}));  // marks join letters
}

TEST(DeepSeekV3Splitter, WhitespaceRuns) {
    EXPECT_EQ(split("a   b"), (Pieces{"a", "  ", " b"}));                // \s+(?!\S) leaves one space
    EXPECT_EQ(split("a   "), (Pieces{"a", "   "}));                      // run ending the piece
    EXPECT_EQ(split("a \n \n  b"), (Pieces{"a", " \n \n", " ", " b"}));  // \s*[\r\n]+, then as above
    EXPECT_EQ(split("a\tb"), (Pieces{"a", "\tb"}));
}

TEST(DeepSeekV3Splitter, UnmatchedCharactersFormGaps) { EXPECT_EQ(split("\x01\x02!"), (Pieces{"\x01\x02", "!"})); }

// The ASCII fast path must find exactly the pieces of the general path, on
// strings built from what each of its branches stops or hands over at:
// digits and non-ASCII numbers, letters with and without marks, CJK, ASCII
// and non-ASCII punctuation and symbols, every kind of whitespace (and
// non-ASCII spaces), control characters.
TEST(DeepSeekV3Splitter, AsciiFastPathMatchesRegions) {
    const std::vector<std::string_view> atoms = {
        "a",      "Z",      "q", "0",      "7", " ",        "  ", "\t",        "\n", "\r",   "\r\n",
        "\v",     "\f",     "!", ".",      "$", "+",        "(",  "_",         "~",  "\x01", "\x1f",
        "\x7f",   "é",      "ß", "\u0301", "²", "٣",        "你", "の",        "・", "゛",   "\u00a0",
        "\u3000", "\u2028", "«", "€",      "—", "\xc2\x85", "Ж",  "\U0001F600"};
    std::mt19937 rng(18);
    std::uniform_int_distribution<std::size_t> pick(0, atoms.size() - 1);
    std::uniform_int_distribution<int> length(1, 24);
    std::vector<std::uint32_t> fast;
    std::vector<std::uint32_t> regions;
    for (int round = 0; round < 200000; ++round) {
        std::string text;
        for (int k = length(rng); k > 0; --k) text += atoms[pick(rng)];
        fast.clear();
        regions.clear();
        splitDeepSeekV3(text, fast);
        splitDeepSeekV3ByRegions(text, regions);
        ASSERT_EQ(fast, regions) << "text: " << text;
    }
}

// Sixty-four bytes at a time: texts long enough for several windows, mostly
// of what windows vouch for (words, numbers of every length, punctuation
// runs, whitespace runs of every kind), with what they must leave to the
// byte-wise path (CR/LF after a blank, control characters, non-ASCII
// letters, numbers, spaces and punctuation) sprinkled in.
TEST(DeepSeekV3Splitter, WindowsMatchRegions) {
    const std::vector<std::string_view> common = {
        "word", "x",  "Identifier", "a",    "the",    "0", "42",  "1234", "1234567", "3.14", " ",   "  ",   "    ",
        "\t",   "\n", "\r\n",       "\n\n", "\n    ", ".", ",",   "(",    ")",       "->",   "::",  "\\fB", "\\fR",
        "'",    "\"", "_",          "#",    "{",      "}", ";\n", "==",   "\v",      "\f",   " \t", "\t "};
    const std::vector<std::string_view> rare = {" \n", "\t\r\n", "  \n ", "\x01", "\x1f", "\x7f", "é",     "ß",
                                                "²",   "\u00a0", "«",     "—",    "你",   "Ж",    "\u3000"};
    std::mt19937 rng(64);
    std::uniform_int_distribution<std::size_t> pick_common(0, common.size() - 1);
    std::uniform_int_distribution<std::size_t> pick_rare(0, rare.size() - 1);
    std::uniform_int_distribution<int> percent(0, 99);
    std::uniform_int_distribution<int> length(20, 160);
    std::vector<std::uint32_t> fast;
    std::vector<std::uint32_t> regions;
    for (int round = 0; round < 40000; ++round) {
        // Some texts all common, so whole windows are vouched for.
        const int rare_percent = round % 3 == 0 ? 0 : round % 3 == 1 ? 2 : 10;
        std::string text;
        for (int k = length(rng); k > 0; --k) {
            text += percent(rng) < rare_percent ? rare[pick_rare(rng)] : common[pick_common(rng)];
        }
        fast.clear();
        regions.clear();
        splitDeepSeekV3(text, fast);
        splitDeepSeekV3ByRegions(text, regions);
        ASSERT_EQ(fast, regions) << "text: " << text;
    }
}

// Letter runs are found sixteen bytes at a time: a run of every length up to
// three blocks, ended by every ASCII byte and by non-ASCII characters, after
// each kind of piece start, gives the pieces of the general path.
TEST(DeepSeekV3Splitter, LetterRunsOfEveryLengthEndWhereTheGeneralPathEnds) {
    std::vector<std::string> enders;
    for (int c = 1; c < 0x80; ++c) enders.emplace_back(1, static_cast<char>(c));
    for (const char* other : {"é", "\u0301", "你", "\u00a0", "²", "€"}) enders.emplace_back(other);
    std::vector<std::uint32_t> fast;
    std::vector<std::uint32_t> regions;
    for (const std::string_view start : {"", " ", ".", "\t", "_", "\n"}) {
        for (std::size_t length = 1; length <= 48; ++length) {
            for (const std::string& ender : enders) {
                std::string letters;
                for (std::size_t i = 0; i < length; ++i) letters += static_cast<char>((i % 2 ? 'a' : 'A') + i % 26);
                // With and without 16 bytes after the end, so both the block
                // scan and the bytewise tail meet the end.
                for (const std::string_view tail : {"", "tail of sixteen+"}) {
                    const std::string text = std::string(start) + letters + ender + std::string(tail);
                    fast.clear();
                    regions.clear();
                    splitDeepSeekV3(text, fast);
                    splitDeepSeekV3ByRegions(text, regions);
                    ASSERT_EQ(fast, regions) << "text: " << text;
                }
            }
        }
    }
    EXPECT_EQ(split("\\fBidentifier_with_a_very_long_name\\fR"),
              (Pieces{"\\fBidentifier", "_with", "_a", "_very", "_long", "_name", "\\fR"}));
}

// A batch at a time, the splitter must give the pieces of one whole split,
// whatever the batch: it stops inside regions (non-ASCII text is one region
// up to the next number or CJK character) and inside 64-byte windows.
TEST(DeepSeekV3Splitter, BatchesGiveThePiecesOfOneSplit) {
    const std::vector<std::string_view> atoms = {"word", " ",    "  ",     "\n",   "\n\n  ", "42",   "1234567", ".",
                                                 ",",    "->",   "Привет", " мир", "é",      "你好", "の",      "😀",
                                                 "\t",   "\x01", "\u00a0", "«",    " (",     "\r\n", "abc"};
    std::mt19937 rng(44);
    std::uniform_int_distribution<std::size_t> pick(0, atoms.size() - 1);
    std::uniform_int_distribution<int> length(1, 400);
    std::vector<std::uint32_t> whole;
    std::vector<std::uint32_t> batched;
    for (int round = 0; round < 3000; ++round) {
        std::string text;
        for (int k = length(rng); k > 0; --k) text += atoms[pick(rng)];
        whole.clear();
        splitDeepSeekV3(text, whole);
        for (const std::size_t batch : {1, 2, 3, 7, 64, 4096}) {
            batched.clear();
            DeepSeekV3Splitter splitter(text);
            while (true) {
                const std::size_t before = batched.size();
                if (!splitter.next(batched, batch)) break;
                ASSERT_LE(batched.size() - before, batch + 64);
            }
            ASSERT_EQ(batched, whole) << "batch " << batch << ", text: " << text;
        }
    }
}

}  // namespace
}  // namespace dpgate::admission
