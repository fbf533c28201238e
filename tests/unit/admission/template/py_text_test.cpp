// Python's str semantics over UTF-8: targeted cases per function, then the
// real thing as the oracle: /usr/bin/python3 judges every code point and a
// few thousand seeded random strings.
#include "admission/template/jinja/py_text.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dpgate::admission::jinja {
namespace {

using Parts = std::vector<std::string>;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

Parts toParts(const std::vector<std::string_view>& views) { return Parts(views.begin(), views.end()); }

std::string utf8(char32_t c) {
    std::string out;
    if (c < 0x80) {
        out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (c >> 12)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (c >> 18)));
        out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
    return out;
}

// --- Targeted cases --------------------------------------------------------------

TEST(PyText, UpperUsesFullMappings) {
    EXPECT_EQ(pyUpper("abc xyz 123"), "ABC XYZ 123");
    EXPECT_EQ(pyUpper("straße"), "STRASSE");
    EXPECT_EQ(pyUpper("ﬁ ﬂ ﬃ"), "FI FL FFI");
    EXPECT_EQ(pyUpper("ŉ"), "ʼN");
    EXPECT_EQ(pyUpper("ΐ"), "\u0399\u0308\u0301");
    EXPECT_EQ(pyUpper("ᾳ"), "ΑΙ");
    EXPECT_EQ(pyUpper("ǆ ǅ"), "Ǆ Ǆ");
    EXPECT_EQ(pyUpper("ა"), "Ა");  // Georgian Mkhedruli to Mtavruli
    EXPECT_EQ(pyUpper("ꭰ"), "Ꭰ");  // Cherokee small letter
    EXPECT_EQ(pyUpper("ı i"), "I I");
    EXPECT_EQ(pyUpper(""), "");
}

TEST(PyText, LowerAppliesFinalSigma) {
    EXPECT_EQ(pyLower("HELLO Wörld"), "hello wörld");
    EXPECT_EQ(pyLower("İ"), "i̇");
    EXPECT_EQ(pyLower("Ⅻ"), "ⅻ");
    EXPECT_EQ(pyLower("Ꭰ"), "ꭰ");
    EXPECT_EQ(pyLower("Σ"), "σ");        // nothing cased before it
    EXPECT_EQ(pyLower("ΟΔΟΣ"), "οδος");  // word-final
    EXPECT_EQ(pyLower("ΑΣ Β"), "ας β");  // followed by uncased space
    EXPECT_EQ(pyLower("ΑΣΑ"), "ασα");    // inside a word
    EXPECT_EQ(pyLower("ΑΣ'"), "ας'");    // the apostrophe is case-ignorable
    EXPECT_EQ(pyLower("ΑΣ'Α"), "ασ'α");  // ... and skipped to a cased letter
    EXPECT_EQ(pyLower("'Σ"), "'σ");      // only case-ignorables before
    EXPECT_EQ(pyLower("Α.Σ"), "α.ς");    // '.' is case-ignorable (MidNumLet)
    EXPECT_EQ(pyLower("ΑΣ\u0301"), "ας\u0301");
    EXPECT_EQ(pyLower("ΑΣ\u0301Β"), "ασ\u0301β");
    EXPECT_EQ(pyLower("1Σ"), "1σ");
}

TEST(PyText, TitleAndCapitalize) {
    EXPECT_EQ(pyTitle("hello wORLD"), "Hello World");
    EXPECT_EQ(pyTitle("they're bill's"), "They'Re Bill'S");
    EXPECT_EQ(pyTitle("3rd place"), "3Rd Place");
    EXPECT_EQ(pyTitle("ǆemal"), "ǅemal");
    EXPECT_EQ(pyTitle("ßa ﬁsh"), "Ssa Fish");
    EXPECT_EQ(pyTitle("ა"), "ა");  // Georgian has no titlecase form
    EXPECT_EQ(pyTitle("ΟΔΟΣ ΟΔΟΣ"), "Οδος Οδος");
    EXPECT_EQ(pyCapitalize("ǆa"), "ǅa");  // titlecase, as Python 3.8+
    EXPECT_EQ(pyCapitalize("hELLO wORLD"), "Hello world");
    EXPECT_EQ(pyCapitalize("ßX"), "Ssx");
    EXPECT_EQ(pyCapitalize("ΑΣ"), "Ας");
    EXPECT_EQ(pyCapitalize(""), "");
}

TEST(PyText, Swapcase) {
    EXPECT_EQ(pySwapcase("Hello World"), "hELLO wORLD");
    EXPECT_EQ(pySwapcase("ß"), "SS");
    EXPECT_EQ(pySwapcase("ΑΣ"), "ας");
    EXPECT_EQ(pySwapcase("ǅ"), "ǅ");  // titlecase: neither upper nor lower
    EXPECT_EQ(pySwapcase("İ"), "i̇");
}

TEST(PyText, CharacterClasses) {
    for (char32_t c : {U'\t', U'\n', U'\v', U'\f', U'\r', U'\x1c', U'\x1f', U' ', U'\x85', U'\xa0', U'\u1680',
                       U'\u2000', U'\u200a', U'\u2028', U'\u2029', U'\u202f', U'\u205f', U'\u3000'}) {
        EXPECT_TRUE(pyIsSpace(c)) << static_cast<std::uint32_t>(c);
    }
    for (char32_t c : {U'a', U'\x00', U'\u200b', U'\u180e', U'\ufeff'}) {
        EXPECT_FALSE(pyIsSpace(c)) << static_cast<std::uint32_t>(c);
    }
    EXPECT_TRUE(pyIsPrintable(U' '));
    EXPECT_TRUE(pyIsPrintable(U'é'));
    EXPECT_TRUE(pyIsPrintable(U'\U0001F600'));
    EXPECT_FALSE(pyIsPrintable(U'\xa0'));
    EXPECT_FALSE(pyIsPrintable(U'\u00ad'));
    EXPECT_FALSE(pyIsPrintable(U'\u3000'));
    EXPECT_FALSE(pyIsPrintable(U'\U000E0001'));
    EXPECT_FALSE(pyIsPrintable(0x0378));  // unassigned
}

TEST(PyText, StringPredicates) {
    EXPECT_FALSE(pyIsSpaceStr(""));
    EXPECT_TRUE(pyIsSpaceStr(" \t\u3000"));
    EXPECT_FALSE(pyIsSpaceStr(" a "));
    EXPECT_TRUE(pyIsPrintableStr(""));
    EXPECT_FALSE(pyIsPrintableStr("a\n"));
    EXPECT_TRUE(pyIsAlpha("abcΣ漢"));
    EXPECT_FALSE(pyIsAlpha("ab1"));
    EXPECT_FALSE(pyIsAlpha(""));
    EXPECT_TRUE(pyIsDigit("12²"));
    EXPECT_FALSE(pyIsDecimal("12²"));
    EXPECT_TRUE(pyIsDecimal("١٢"));
    EXPECT_TRUE(pyIsNumeric("½Ⅻ"));
    EXPECT_FALSE(pyIsDigit("½"));
    EXPECT_TRUE(pyIsAlnum("a1½"));
    EXPECT_FALSE(pyIsAlnum("a 1"));
    EXPECT_TRUE(pyIsUpper("ABC1 Ⅻ"));
    EXPECT_FALSE(pyIsUpper("1"));
    EXPECT_FALSE(pyIsUpper("ǅ"));
    EXPECT_FALSE(pyIsUpper("ABc"));
    EXPECT_TRUE(pyIsLower("abc1ß"));
    EXPECT_FALSE(pyIsLower("aǅ"));
    EXPECT_FALSE(pyIsLower(""));
    EXPECT_TRUE(pyIsTitle("Hello World 2"));
    EXPECT_TRUE(pyIsTitle("ǅemal"));
    EXPECT_TRUE(pyIsTitle("ǅ"));
    EXPECT_TRUE(pyIsTitle("A"));
    EXPECT_FALSE(pyIsTitle("HEllo"));
    EXPECT_FALSE(pyIsTitle("hello"));
    EXPECT_FALSE(pyIsTitle("1"));
    EXPECT_FALSE(pyIsTitle(""));
}

TEST(PyText, Strip) {
    EXPECT_EQ(pyStrip("  \u3000a b\u2029 \x85"), "a b");
    EXPECT_EQ(pyLstrip(" \ta b "), "a b ");
    EXPECT_EQ(pyRstrip(" a b\v\f"), " a b");
    EXPECT_EQ(pyStrip(" \t "), "");
    EXPECT_EQ(pyStrip(""), "");
    EXPECT_EQ(pyStrip("\u200ba\u200b"), "\u200ba\u200b");  // zero width space is not whitespace
    EXPECT_EQ(pyStrip("xyxaxyx", "xy"), "a");
    EXPECT_EQ(pyLstrip("xyxaxyx", "yx"), "axyx");
    EXPECT_EQ(pyRstrip("xyxaxyx", "x"), "xyxaxy");
    EXPECT_EQ(pyStrip(" a ", ""), " a ");
    EXPECT_EQ(pyStrip("ΣαΣ€", "€Σ"), "α");
    EXPECT_EQ(pyStrip("😀😀", "😀"), "");
    // A returned view points into the argument.
    const std::string text = "  kept  ";
    EXPECT_EQ(pyStrip(text).data(), text.data() + 2);
}

TEST(PyText, SplitOnWhitespace) {
    EXPECT_EQ(toParts(pySplit(" a  b\u3000c\u2028d ")), (Parts{"a", "b", "c", "d"}));
    EXPECT_EQ(toParts(pySplit("")), Parts{});
    EXPECT_EQ(toParts(pySplit(" \t\n")), Parts{});
    EXPECT_EQ(toParts(pySplit("  a b c  ", 1)), (Parts{"a", "b c  "}));
    EXPECT_EQ(toParts(pySplit("  a b c  ", 0)), (Parts{"a b c  "}));
    EXPECT_EQ(toParts(pyRsplit("  a b c  ")), (Parts{"a", "b", "c"}));
    EXPECT_EQ(toParts(pyRsplit("  a b c  ", 1)), (Parts{"  a b", "c"}));
    EXPECT_EQ(toParts(pyRsplit("  a b c  ", 0)), (Parts{"  a b c"}));
}

TEST(PyText, SplitOnSeparator) {
    EXPECT_EQ(toParts(pySplit("a,b,,c", ",")), (Parts{"a", "b", "", "c"}));
    EXPECT_EQ(toParts(pySplit("a,b,,c", ",", 1)), (Parts{"a", "b,,c"}));
    EXPECT_EQ(toParts(pySplit("a,b", ",", 0)), (Parts{"a,b"}));
    EXPECT_EQ(toParts(pySplit("", ",")), (Parts{""}));
    EXPECT_EQ(toParts(pySplit("aaa", "aa")), (Parts{"", "a"}));
    EXPECT_EQ(toParts(pyRsplit("aaa", "aa")), (Parts{"a", ""}));
    EXPECT_EQ(toParts(pyRsplit("a,b,,c", ",", 2)), (Parts{"a,b", "", "c"}));
    EXPECT_EQ(toParts(pySplit("αΣβΣ", "Σ")), (Parts{"α", "β", ""}));
}

TEST(PyText, Splitlines) {
    const std::string text = "a\nb\r\nc\rd\ve\ff\x1cg\x1dh\x1ei\u0085j\u2028k\u2029l";
    EXPECT_EQ(toParts(pySplitlines(text)), (Parts{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}));
    EXPECT_EQ(toParts(pySplitlines("a\r\nb\u2028", true)), (Parts{"a\r\n", "b\u2028"}));
    EXPECT_EQ(toParts(pySplitlines("a\n")), (Parts{"a"}));
    EXPECT_EQ(toParts(pySplitlines("\n\n")), (Parts{"", ""}));
    EXPECT_EQ(toParts(pySplitlines("\r\r\n")), (Parts{"", ""}));
    EXPECT_EQ(toParts(pySplitlines("")), Parts{});
    EXPECT_EQ(toParts(pySplitlines("a\x1f b")), (Parts{"a\x1f b"}));  // whitespace, not a boundary
}

TEST(PyText, CodePointsSliceAndIndex) {
    EXPECT_EQ(codePointCount("aé€😀"), 4u);
    EXPECT_EQ(codePointCount(""), 0u);
    const std::string text = "héllo😀";
    EXPECT_EQ(pySlice(text, 1, 3, 1), "él");
    EXPECT_EQ(pySlice(text, {}, {}, -1), "😀olléh");
    EXPECT_EQ(pySlice(text, {}, {}, 2), "hlo");
    EXPECT_EQ(pySlice(text, -2, {}, 1), "o😀");
    EXPECT_EQ(pySlice(text, 10, {}, 1), "");
    EXPECT_EQ(pySlice(text, {}, -10, 1), "");
    EXPECT_EQ(pySlice(text, 4, 1, -1), "oll");
    EXPECT_EQ(pySlice(text, kMin, kMax, 1), text);
    EXPECT_EQ(pySlice(text, kMax, kMin, -2), "😀lé");
    EXPECT_EQ(pySlice(text, {}, {}, kMin), "😀");
    EXPECT_EQ(pySlice(text, {}, {}, kMax), "h");
    EXPECT_EQ(pySlice(text, {}, {}, 0), "");  // Python raises; the caller checks first
    EXPECT_EQ(pyCharAt(text, 1), "é");
    EXPECT_EQ(pyCharAt(text, -1), "😀");
    EXPECT_EQ(pyCharAt(text, -6), "h");
    EXPECT_EQ(pyCharAt(text, 6), std::nullopt);
    EXPECT_EQ(pyCharAt(text, -7), std::nullopt);
    EXPECT_EQ(pyCharAt(text, kMin), std::nullopt);
    EXPECT_EQ(pyCharAt("", 0), std::nullopt);
}

TEST(PyText, FindAndCount) {
    const std::string text = "añb añb";
    EXPECT_EQ(pyFind(text, "b"), 2);
    EXPECT_EQ(pyRfind(text, "b"), 6);
    EXPECT_EQ(pyFind(text, "x"), -1);
    EXPECT_EQ(pyFind(text, ""), 0);
    EXPECT_EQ(pyRfind(text, ""), 7);
    EXPECT_EQ(pyFind(text, "ñ", 2), 5);
    EXPECT_EQ(pyFind(text, "a", -3), 4);
    EXPECT_EQ(pyFind(text, "b", 0, 2), -1);
    EXPECT_EQ(pyFind(text, "b", std::nullopt, -4), 2);
    EXPECT_EQ(pyRfind(text, "a", 0, 4), 0);
    EXPECT_EQ(pyFind(text, "", 7), 7);
    EXPECT_EQ(pyFind(text, "", 8), -1);
    EXPECT_EQ(pyRfind(text, "", 2, 5), 5);
    EXPECT_EQ(pyRfind(text, "", 5, 2), -1);
    EXPECT_EQ(pyFind(text, "añb", kMin, kMax), 0);
    EXPECT_EQ(pyCount(text, "ñ"), 2);
    EXPECT_EQ(pyCount(text, ""), 8);
    EXPECT_EQ(pyCount(text, "", 8), 0);
    EXPECT_EQ(pyCount(text, "", 2, 4), 3);
    EXPECT_EQ(pyCount("aaaa", "aa"), 2);
    EXPECT_EQ(pyCount("aaaa", "aa", 1), 1);
    EXPECT_TRUE(pyStartswith("héllo", "ll", 2));
    EXPECT_FALSE(pyStartswith("héllo", "ll", 2, 3));
    EXPECT_TRUE(pyStartswith("abc", "", 3));
    EXPECT_FALSE(pyStartswith("abc", "", 4));
    EXPECT_TRUE(pyEndswith("héllo", "é", 0, 2));
    EXPECT_TRUE(pyEndswith("héllo", "lo"));
    EXPECT_FALSE(pyEndswith("lo", "héllo"));
}

// Needles from 32 bytes on take the Knuth-Morris-Pratt path; its answers
// must be the naive search's on repetitive text, both directions.
TEST(PyText, LongNeedlesMatchNaiveSearch) {
    std::mt19937 rng(7);
    for (int round = 0; round < 300; ++round) {
        std::string text;
        const std::size_t length = 200 + rng() % 400;
        for (std::size_t i = 0; i < length; ++i) text.push_back(rng() % 8 == 0 ? 'b' : 'a');
        std::string needle;
        if (rng() % 2 == 0) {
            const std::size_t at = rng() % (length - 40);
            needle = text.substr(at, 32 + rng() % 8);
        } else {
            for (std::size_t i = 0, n = 32 + rng() % 8; i < n; ++i) needle.push_back(rng() % 8 == 0 ? 'b' : 'a');
        }
        const auto naive_find = static_cast<std::int64_t>(text.find(needle));
        const auto naive_rfind = static_cast<std::int64_t>(text.rfind(needle));
        EXPECT_EQ(pyFind(text, needle), naive_find == static_cast<std::int64_t>(std::string::npos) ? -1 : naive_find);
        EXPECT_EQ(pyRfind(text, needle),
                  naive_rfind == static_cast<std::int64_t>(std::string::npos) ? -1 : naive_rfind);
        std::int64_t count = 0;
        for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size())) {
            ++count;
        }
        EXPECT_EQ(pyCount(text, needle), count);
        std::vector<std::string> pieces;
        std::size_t begin = 0;
        for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, begin)) {
            pieces.push_back(text.substr(begin, pos - begin));
            begin = pos + needle.size();
        }
        pieces.push_back(text.substr(begin));
        EXPECT_EQ(toParts(pySplit(text, needle)), pieces);
    }
    // Text a needle almost matches everywhere.
    const std::string many_a(100000, 'a');
    const std::string needle = std::string(5000, 'a') + "b";
    EXPECT_EQ(pyFind(many_a, needle), -1);
    EXPECT_EQ(pyRfind(many_a, "b" + std::string(5000, 'a')), -1);
    EXPECT_EQ(pyCount(many_a + needle, needle), 1);
}

TEST(PyText, Replace) {
    EXPECT_EQ(pyReplace("aaa", "a", "b"), "bbb");
    EXPECT_EQ(pyReplace("aaa", "a", "b", 2), "bba");
    EXPECT_EQ(pyReplace("aaa", "a", "b", 0), "aaa");
    EXPECT_EQ(pyReplace("aaaa", "aa", "x"), "xx");
    EXPECT_EQ(pyReplace("abc", "", "-"), "-a-b-c-");
    EXPECT_EQ(pyReplace("héé", "", "-", 2), "-h-éé");
    EXPECT_EQ(pyReplace("hé", "", "-", 3), "-h-é-");
    EXPECT_EQ(pyReplace("", "", "x"), "x");
    EXPECT_EQ(pyReplace("", "", "x", 0), "");
    EXPECT_EQ(pyReplace("ΣΣ", "Σ", ""), "");
    EXPECT_EQ(pyReplace("a😀b", "😀", "\n"), "a\nb");
}

TEST(PyText, Padding) {
    EXPECT_EQ(pyCenter("abc", 6, "*"), "*abc**");
    EXPECT_EQ(pyCenter("abc", 7, "*"), "**abc**");
    EXPECT_EQ(pyCenter("ab", 5), "  ab ");  // odd width: the odd column goes left
    EXPECT_EQ(pyCenter("ab", 1), "ab");
    EXPECT_EQ(pyCenter("é", 4, "★"), "★é★★");
    EXPECT_EQ(pyLjust("é", 3, "★"), "é★★");
    EXPECT_EQ(pyRjust("é", 3, "★"), "★★é");
    EXPECT_EQ(pyRjust("abc", -5), "abc");
    EXPECT_EQ(pyZfill("-42", 5), "-0042");
    EXPECT_EQ(pyZfill("+x", 4), "+00x");
    EXPECT_EQ(pyZfill("", 3), "000");
    EXPECT_EQ(pyZfill("-", 3), "-00");
    EXPECT_EQ(pyZfill("42", -1), "42");
    EXPECT_EQ(pyZfill("é", 3), "00é");
}

TEST(PyText, Repr) {
    EXPECT_EQ(pyRepr(""), "''");
    EXPECT_EQ(pyRepr("it's"), "\"it's\"");
    EXPECT_EQ(pyRepr("say \"hi\""), "'say \"hi\"'");
    EXPECT_EQ(pyRepr("it's \"x\""), "'it\\'s \"x\"'");
    EXPECT_EQ(pyRepr("a\\b\n\t\r"), "'a\\\\b\\n\\t\\r'");
    EXPECT_EQ(pyRepr(std::string("\x00\x7f", 2)), "'\\x00\\x7f'");
    EXPECT_EQ(pyRepr("\u0085\u00a0é\u00ad"), "'\\x85\\xa0é\\xad'");
    EXPECT_EQ(pyRepr("\u200b\u3000漢"), "'\\u200b\\u3000漢'");
    EXPECT_EQ(pyRepr("\U000E0001😀"), "'\\U000e0001😀'");
}

// --- The oracle ------------------------------------------------------------------------

constexpr const char* kPython = "/usr/bin/python3";

// argv[1] "codepoints": the version, then per class the ranges where it
// holds, then per mapping the code points it changes (hex UTF-8).
// argv[1] "strings" FILE: one JSON result line per JSON case line.
constexpr const char* kOracle = R"PY(
import json, re, sys, unicodedata

def codepoints():
    lines = []
    w = lines.append
    w("V %s\n" % unicodedata.unidata_version)
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    chars = [chr(cp) for cp in cps]
    # The flags str exposes only through behaviour: cased and case-ignorable
    # (final sigma, title) and line boundaries.
    probes = {
        "sigma_after": lambda ch: ("A" + ch + "\u03a3").lower()[-1] == "\u03c2",
        "sigma_before": lambda ch: ("A\u03a3" + ch).lower()[1] == "\u03c2",
        "title_after": lambda ch: (ch + "a").title()[-1] == "a",
        "splits_line": lambda ch: len(("a" + ch + "b").splitlines()) == 2,
        "isspace_str": str.isspace,
    }
    for name in ("isspace", "isprintable", "isalpha", "isdigit", "isdecimal", "isnumeric", "isupper", "islower",
                 *probes):
        marks = bytes(map(probes.get(name) or getattr(str, name), chars))
        for m in re.finditer(b"\x01+", marks):
            w("P %s %x %x\n" % (name, cps[m.start()], cps[m.end() - 1]))
    for name in ("upper", "lower", "title"):
        for cp, ch, mapped in zip(cps, chars, map(getattr(str, name), chars)):
            if mapped != ch:
                w("M %s %x %s\n" % (name, cp, mapped.encode().hex()))
    w("END\n")
    sys.stdout.write("".join(lines))

def results(case):
    s = case["s"]
    r = {"ascii": ascii(s), "len": len(s), "repr": repr(s)}
    for name in ("lower", "upper", "title", "capitalize", "swapcase", "isupper", "islower", "istitle", "isalpha",
                 "isalnum", "isspace", "isdigit", "isdecimal", "isnumeric", "isprintable", "strip", "lstrip",
                 "rstrip", "split", "rsplit", "splitlines"):
        r[name] = getattr(s, name)()
    chars, sep, ms = case["chars"], case["sep"], case["maxsplit"]
    r["strip_c"], r["lstrip_c"], r["rstrip_c"] = s.strip(chars), s.lstrip(chars), s.rstrip(chars)
    r["split_max"], r["rsplit_max"] = s.split(None, ms), s.rsplit(None, ms)
    r["split_sep"], r["rsplit_sep"] = s.split(sep, ms), s.rsplit(sep, ms)
    r["splitlines_keep"] = s.splitlines(True)
    r["slice"] = s[case["start"]:case["stop"]:case["step"]]
    r["slice1"] = s[case["start"]:case["stop"]]
    i = case["index"]
    r["charat"] = s[i] if -len(s) <= i < len(s) else None
    sub, fs, fe = case["sub"], case["fstart"], case["fend"]
    r["find"], r["rfind"], r["count"] = s.find(sub, fs, fe), s.rfind(sub, fs, fe), s.count(sub, fs, fe)
    r["find0"], r["rfind0"], r["count0"] = s.find(sub), s.rfind(sub), s.count(sub)
    r["startswith"], r["endswith"] = s.startswith(sub, fs, fe), s.endswith(sub, fs, fe)
    r["replace"] = s.replace(case["old"], case["new"], case["count"])
    r["replace_all"] = s.replace(case["old"], case["new"])
    width, fill = case["width"], case["fill"]
    r["center"], r["ljust"], r["rjust"] = s.center(width, fill), s.ljust(width, fill), s.rjust(width, fill)
    r["zfill"] = s.zfill(width)
    return r

def strings(path):
    lines = ["V %s" % unicodedata.unidata_version]
    with open(path, encoding="ascii") as f:
        for line in f:
            lines.append(json.dumps(results(json.loads(line)), ensure_ascii=True))
    lines.append("END")
    sys.stdout.write("\n".join(lines) + "\n")

if sys.argv[1] == "codepoints":
    codepoints()
else:
    strings(sys.argv[2])
)PY";

// A scratch directory removed on destruction.
class ScratchDir {
public:
    ScratchDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "py_text_test_XXXXXX").string();
        if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
    }
    ~ScratchDir() {
        std::error_code ignored;
        if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
    }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// The oracle as a child process. It computes while this process computes
// its own answers (the two cores work at once) and writes everything at the
// end, so it never blocks on a full pipe before output() reads it.
class Oracle {
public:
    Oracle(const ScratchDir& dir, const std::string& args) {
        const auto script = dir.path() / "oracle.py";
        std::ofstream(script) << kOracle;
        const std::string command = std::string(kPython) + " '" + script.string() + "' " + args;
        pipe_ = popen(command.c_str(), "r");
    }
    Oracle(const Oracle&) = delete;
    Oracle& operator=(const Oracle&) = delete;
    ~Oracle() {
        if (pipe_ != nullptr) pclose(pipe_);
    }

    // Its whole stdout, or nullopt when it failed.
    std::optional<std::string> output() {
        if (pipe_ == nullptr) return std::nullopt;
        std::string out;
        char buffer[1 << 16];
        for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe_)) > 0;) out.append(buffer, n);
        const int status = pclose(pipe_);
        pipe_ = nullptr;
        if (status != 0) return std::nullopt;
        return out;
    }

private:
    FILE* pipe_ = nullptr;
};

std::string fromHex(std::string_view hex) {
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    }
    return out;
}

bool isSurrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }

// The first line "V <version>"; false (and a reason) when it is not ours.
bool sameUnicode(std::istream& in, std::string& why) {
    std::string tag, version;
    in >> tag >> version;
    if (tag != "V") {
        why = "oracle output starts with '" + tag + "'";
        return false;
    }
    if (version != pyUnicodeVersion()) {
        why = "python3 has Unicode " + version + ", the tables " + std::string(pyUnicodeVersion()) +
              "; regenerate them with gen_py_text_tables.py for that Python";
        return false;
    }
    return true;
}

// Per code point: the classes (and behaviours that show the cased,
// case-ignorable and line-boundary flags) as one bit each, and the code
// points each case mapping changes.
struct CodePointAnswers {
    std::vector<std::uint16_t> bits = std::vector<std::uint16_t>(0x110000, 0);
    std::map<std::string, std::map<char32_t, std::string>> changed;
};

using Probe = bool (*)(char32_t c, const std::string& text);

// In the bit order of CodePointAnswers::bits; the oracle names them alike.
const std::vector<std::pair<std::string, Probe>>& probes() {
    static const std::vector<std::pair<std::string, Probe>> kProbes = {
        {"isspace", [](char32_t c, const std::string&) { return pyIsSpace(c); }},
        {"isspace_str", [](char32_t, const std::string& text) { return pyIsSpaceStr(text); }},
        {"isprintable", [](char32_t c, const std::string&) { return pyIsPrintable(c); }},
        {"isalpha", [](char32_t, const std::string& text) { return pyIsAlpha(text); }},
        {"isdigit", [](char32_t, const std::string& text) { return pyIsDigit(text); }},
        {"isdecimal", [](char32_t, const std::string& text) { return pyIsDecimal(text); }},
        {"isnumeric", [](char32_t, const std::string& text) { return pyIsNumeric(text); }},
        {"isupper", [](char32_t, const std::string& text) { return pyIsUpper(text); }},
        {"islower", [](char32_t, const std::string& text) { return pyIsLower(text); }},
        {"sigma_after", [](char32_t, const std::string& text) { return pyLower("A" + text + "Σ").ends_with("ς"); }},
        {"sigma_before", [](char32_t, const std::string& text) { return pyLower("AΣ" + text).substr(1, 2) == "ς"; }},
        {"title_after", [](char32_t, const std::string& text) { return pyTitle(text + "a").ends_with("a"); }},
        {"splits_line", [](char32_t, const std::string& text) { return pySplitlines("a" + text + "b").size() == 2; }},
    };
    return kProbes;
}

CodePointAnswers ourCodePointAnswers() {
    CodePointAnswers ours;
    const auto& all = probes();
    for (char32_t c = 0; c < ours.bits.size(); ++c) {
        if (isSurrogate(c)) continue;
        const std::string text = utf8(c);
        for (std::size_t i = 0; i < all.size(); ++i) {
            if (all[i].second(c, text)) ours.bits[c] |= static_cast<std::uint16_t>(1u << i);
        }
        using Mapping = std::string (*)(std::string_view);
        for (const auto& [name, mapping] :
             {std::pair<const char*, Mapping>{"upper", pyUpper}, std::pair<const char*, Mapping>{"lower", pyLower},
              std::pair<const char*, Mapping>{"title", pyTitle}}) {
            std::string mapped = mapping(text);
            if (mapped != text) ours.changed[name][c] = std::move(mapped);
        }
    }
    return ours;
}

// The oracle's "P name first last" and "M name code-point hex" lines.
std::optional<CodePointAnswers> parseCodePointAnswers(std::istream& in) {
    CodePointAnswers theirs;
    std::map<std::string, std::size_t> bit_of;
    for (std::size_t i = 0; i < probes().size(); ++i) bit_of[probes()[i].first] = i;
    for (std::string tag; in >> tag;) {
        if (tag == "END") return theirs;
        std::string name, first, second;
        in >> name >> first >> second;
        if (tag == "P" && bit_of.count(name) != 0) {
            const auto bit = static_cast<std::uint16_t>(1u << bit_of[name]);
            for (auto c = std::stoul(first, nullptr, 16), last = std::stoul(second, nullptr, 16); c <= last; ++c) {
                // A range may span the surrogates, which the oracle leaves out.
                if (!isSurrogate(static_cast<char32_t>(c))) theirs.bits[c] |= bit;
            }
        } else if (tag == "M") {
            theirs.changed[name][static_cast<char32_t>(std::stoul(first, nullptr, 16))] = fromHex(second);
        } else {
            ADD_FAILURE() << "unexpected oracle line: " << tag << ' ' << name;
            return std::nullopt;
        }
    }
    ADD_FAILURE() << "truncated oracle output";
    return std::nullopt;
}

TEST(PyTextOracle, EveryCodePoint) {
    if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is missing: no oracle";
    ScratchDir dir;
    ASSERT_FALSE(dir.path().empty());
    Oracle oracle(dir, "codepoints");
    const CodePointAnswers ours = ourCodePointAnswers();
    const std::optional<std::string> output = oracle.output();
    ASSERT_TRUE(output.has_value()) << "python3 oracle failed";
    std::istringstream in(*output);
    std::string why;
    if (!sameUnicode(in, why)) GTEST_SKIP() << why;
    const std::optional<CodePointAnswers> theirs = parseCodePointAnswers(in);
    ASSERT_TRUE(theirs.has_value());
    ASSERT_GT(theirs->changed.at("upper").size(), 1000u);

    int failures = 0;
    const auto report = [&failures](char32_t c, const std::string& what) {
        if (++failures <= 30) ADD_FAILURE() << what << " differs at U+" << std::hex << static_cast<std::uint32_t>(c);
    };
    for (char32_t c = 0; c < ours.bits.size(); ++c) {
        const std::uint16_t differ = ours.bits[c] ^ theirs->bits[c];
        for (std::size_t i = 0; i < probes().size(); ++i) {
            if (differ & (1u << i)) report(c, probes()[i].first);
        }
    }
    for (const char* name : {"upper", "lower", "title"}) {
        const auto& our_map = ours.changed.at(name);
        const auto& their_map = theirs->changed.at(name);
        for (const auto& [c, mapped] : our_map) {
            const auto it = their_map.find(c);
            if (it == their_map.end() || it->second != mapped) report(c, name);
        }
        for (const auto& [c, mapped] : their_map) {
            if (our_map.count(c) == 0) report(c, name);
        }
    }
    EXPECT_EQ(failures, 0);
}

// --- Random strings ----------------------------------------------------------------------

// Pieces the random strings are built from: where Python's rules have
// corners (final sigma and what it skips, multi-character and titlecase
// mappings, every whitespace and line boundary, non-printables for repr).
const std::vector<std::string>& atoms() {
    static const std::vector<std::string> kAtoms = {
        "a", "Z", "hello", "World", "x1", "42", "-", "+", "'", "\"", "\\", ".", ":", ",", "_", "%",
        std::string(1, '\0'), "\x07", "\x7f", "\x1b",
        // Greek, sigma in every position, and the case-ignorables the rule skips
        "Σ", "σ", "ς", "ΟΔΟΣ", "ΑΣ", "ΣΑ", "Α", "ἈΣ", "ΐ", "ᾳ", "ᾼ", "ᾀ", "ͅ", "\u00ad", "\u0301", "\u0345", "’", "ʰ",
        // ligatures, special and titlecase mappings
        "ß", "ẞ", "ﬁ", "ﬂ", "ﬀ", "ﬃ", "ﬄ", "ﬅ", "ﬆ", "ŉ", "ǰ", "ǅ", "ǆ", "Ǆ", "ǈ", "ǋ", "ǲ", "և", "Ⅻ", "ⅻ", "Ａ", "ａ",
        // Turkish
        "İ", "ı", "i", "I", "İstanbul",
        // Georgian: Mkhedruli, Mtavruli, Asomtavruli
        "ა", "ბ", "ჰ", "Ა", "Ჰ", "Ⴀ", "ⴀ",
        // Cherokee
        "Ꭰ", "Ꮿ", "ᏸ", "ꭰ", "ꮿ",
        // whitespace and line boundaries of every kind
        " ", "  ", "\t", "\n", "\v", "\f", "\r", "\r\n", "\x1c", "\x1d", "\x1e", "\x1f", "\u0085", "\u00a0", "\u1680",
        "\u2000", "\u2005", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u180e", "\ufeff",
        // CJK, digits and numerics
        "漢", "字", "ｶ", "한", "١", "²", "½", "①", "〇",
        // emoji and their joiners
        "😀", "👍🏽", "👨‍👩‍👧", "❤️", "🇫🇷", "\U000E0067",
        // non-printables and odd corners
        "\u0080", "\u009f", "\u200e", "\ue000", "\uffff", "\U0010FFFF", "\u0378", "\U000E0001"};
    return kAtoms;
}

class RandomText {
public:
    explicit RandomText(std::uint32_t seed) : rng_(seed) {}

    std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(rng_() % n); }
    std::int64_t between(std::int64_t low, std::int64_t high) {
        return low + static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(high - low + 1));
    }

    char32_t anyCodePoint() {
        for (;;) {
            // Mostly the BMP, where the scripts are.
            const char32_t c = below(4) == 0 ? below(0x110000) : below(0x10000);
            if (!isSurrogate(c)) return c;
        }
    }

    std::string text() {
        std::string out;
        const std::uint32_t pieces = below(10) == 0 ? below(120) : below(16);
        for (std::uint32_t i = 0; i < pieces; ++i) out += piece();
        return out;
    }

    std::string piece() {
        switch (below(10)) {
            case 0: return utf8(anyCodePoint());
            case 1: return utf8(0x0370 + below(0x90));  // the Greek block
            case 2: return utf8(0x0300 + below(0x70));  // combining marks
            default: return atoms()[below(static_cast<std::uint32_t>(atoms().size()))];
        }
    }

    // A code-point substring of `text`, sometimes empty.
    std::string substringOf(const std::string& text) {
        std::vector<std::size_t> starts;
        for (std::size_t i = 0; i < text.size(); ++i) {
            if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
        }
        starts.push_back(text.size());
        const std::size_t a = below(static_cast<std::uint32_t>(starts.size()));
        const std::size_t b = a + below(static_cast<std::uint32_t>(std::min<std::size_t>(starts.size() - a, 50)));
        return text.substr(starts[a], starts[b] - starts[a]);
    }

    // None, a small index around the text or an extreme one.
    nlohmann::json bound(std::int64_t length) {
        switch (below(8)) {
            case 0: return nullptr;
            case 1: return below(2) == 0 ? kMin : kMax;
            default: return between(-length - 3, length + 3);
        }
    }

private:
    std::mt19937 rng_;
};

nlohmann::json randomCase(RandomText& random) {
    nlohmann::json c;
    const std::string s = random.text();
    const auto length = static_cast<std::int64_t>(codePointCount(s));
    c["s"] = s;
    std::string chars;
    if (random.below(4) != 0) {
        for (std::uint32_t i = 0, n = random.below(3); i < n; ++i) chars += random.substringOf(s);
        chars += random.piece();
    }
    c["chars"] = chars;
    std::string sep = random.below(2) == 0 ? random.substringOf(s) : random.piece();
    if (sep.empty()) sep = " ";
    c["sep"] = sep;
    c["maxsplit"] = random.between(-1, 4);
    c["start"] = random.bound(length);
    c["stop"] = random.bound(length);
    std::int64_t step = random.between(-4, 4);
    if (step == 0) step = random.below(2) == 0 ? kMin : kMax;
    c["step"] = step;
    c["index"] = random.between(-length - 2, length + 2);
    c["sub"] = random.below(3) != 0 ? random.substringOf(s) : random.piece();
    c["fstart"] = random.bound(length);
    c["fend"] = random.bound(length);
    c["old"] = random.below(3) != 0 ? random.substringOf(s) : random.piece();
    c["new"] = random.below(2) == 0 ? std::string() : random.piece();
    c["count"] = random.between(-1, 3);
    c["width"] = random.between(-2, length + 8);
    c["fill"] = random.below(2) == 0 ? std::string(" ") : utf8(random.anyCodePoint());
    return c;
}

std::optional<std::int64_t> optionalInt(const nlohmann::json& j) {
    if (j.is_null()) return std::nullopt;
    return j.get<std::int64_t>();
}

// Our answers for one case, keyed as the oracle keys them.
nlohmann::json ours(const nlohmann::json& c) {
    const std::string s = c["s"], chars = c["chars"], sep = c["sep"], sub = c["sub"], old = c["old"],
                      replacement = c["new"], fill = c["fill"];
    const std::int64_t maxsplit = c["maxsplit"], step = c["step"], index = c["index"], count = c["count"],
                       width = c["width"];
    const auto start = optionalInt(c["start"]), stop = optionalInt(c["stop"]);
    const auto fstart = optionalInt(c["fstart"]), fend = optionalInt(c["fend"]);
    nlohmann::json r;
    r["len"] = codePointCount(s);
    r["repr"] = pyRepr(s);
    r["lower"] = pyLower(s);
    r["upper"] = pyUpper(s);
    r["title"] = pyTitle(s);
    r["capitalize"] = pyCapitalize(s);
    r["swapcase"] = pySwapcase(s);
    r["isupper"] = pyIsUpper(s);
    r["islower"] = pyIsLower(s);
    r["istitle"] = pyIsTitle(s);
    r["isalpha"] = pyIsAlpha(s);
    r["isalnum"] = pyIsAlnum(s);
    r["isspace"] = pyIsSpaceStr(s);
    r["isdigit"] = pyIsDigit(s);
    r["isdecimal"] = pyIsDecimal(s);
    r["isnumeric"] = pyIsNumeric(s);
    r["isprintable"] = pyIsPrintableStr(s);
    r["strip"] = pyStrip(s);
    r["lstrip"] = pyLstrip(s);
    r["rstrip"] = pyRstrip(s);
    r["strip_c"] = pyStrip(s, chars);
    r["lstrip_c"] = pyLstrip(s, chars);
    r["rstrip_c"] = pyRstrip(s, chars);
    r["split"] = toParts(pySplit(s));
    r["rsplit"] = toParts(pyRsplit(s));
    r["split_max"] = toParts(pySplit(s, maxsplit));
    r["rsplit_max"] = toParts(pyRsplit(s, maxsplit));
    r["split_sep"] = toParts(pySplit(s, sep, maxsplit));
    r["rsplit_sep"] = toParts(pyRsplit(s, sep, maxsplit));
    r["splitlines"] = toParts(pySplitlines(s));
    r["splitlines_keep"] = toParts(pySplitlines(s, true));
    r["slice"] = pySlice(s, start, stop, step);
    r["slice1"] = pySlice(s, start, stop);
    const auto at = pyCharAt(s, index);
    r["charat"] = at ? nlohmann::json(std::string(*at)) : nlohmann::json(nullptr);
    r["find"] = pyFind(s, sub, fstart, fend);
    r["rfind"] = pyRfind(s, sub, fstart, fend);
    r["count"] = pyCount(s, sub, fstart, fend);
    r["find0"] = pyFind(s, sub);
    r["rfind0"] = pyRfind(s, sub);
    r["count0"] = pyCount(s, sub);
    r["startswith"] = pyStartswith(s, sub, fstart, fend);
    r["endswith"] = pyEndswith(s, sub, fstart, fend);
    r["replace"] = pyReplace(s, old, replacement, count);
    r["replace_all"] = pyReplace(s, old, replacement);
    r["center"] = pyCenter(s, width, fill);
    r["ljust"] = pyLjust(s, width, fill);
    r["rjust"] = pyRjust(s, width, fill);
    r["zfill"] = pyZfill(s, width);
    return r;
}

TEST(PyTextOracle, RandomStrings) {
    if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is missing: no oracle";
    constexpr int kCases = 4000;
    ScratchDir dir;
    ASSERT_FALSE(dir.path().empty());
    RandomText random(20240611);
    std::vector<nlohmann::json> cases;
    {
        std::ofstream input(dir.path() / "cases.jsonl");
        for (int i = 0; i < kCases; ++i) {
            cases.push_back(randomCase(random));
            // ensure_ascii: no raw newline or other byte can end a line early.
            input << cases.back().dump(-1, ' ', true) << '\n';
        }
    }
    Oracle oracle(dir, "strings '" + (dir.path() / "cases.jsonl").string() + "'");
    std::vector<nlohmann::json> answers;
    for (const auto& c : cases) answers.push_back(ours(c));
    const std::optional<std::string> output = oracle.output();
    ASSERT_TRUE(output.has_value()) << "python3 oracle failed";
    std::istringstream in(*output);
    std::string why;
    if (!sameUnicode(in, why)) GTEST_SKIP() << why;
    std::string line;
    std::getline(in, line);  // the rest of the version line

    int failures = 0;
    std::size_t compared = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const nlohmann::json& c = cases[i];
        ASSERT_TRUE(std::getline(in, line)) << "truncated oracle output";
        const nlohmann::json expected = nlohmann::json::parse(line);
        for (const auto& [key, value] : answers[i].items()) {
            ++compared;
            if (expected.at(key) == value) continue;
            if (++failures <= 30) {
                ADD_FAILURE() << key << " of " << expected["ascii"].get<std::string>() << " (case "
                              << c.dump(-1, ' ', true) << "): python " << expected.at(key).dump(-1, ' ', true)
                              << ", ours " << value.dump(-1, ' ', true);
            }
        }
    }
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_EQ(line, "END");
    EXPECT_EQ(failures, 0) << "of " << compared << " comparisons";
    EXPECT_GT(compared, static_cast<std::size_t>(kCases) * 40);
}

}  // namespace
}  // namespace dpgate::admission::jinja
