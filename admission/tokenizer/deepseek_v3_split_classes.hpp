#pragma once
// The character classes both ways of splitting DeepSeek V3's pieces read
// (deepseek_v3_splitter.cpp and its fast path): the Unicode classes the
// patterns name, and the classes they spell out literally.
#include <cstdint>
#include <string_view>

#include "admission/tokenizer/unicode_classes.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace dpgate::admission::splitter_detail {

// Flags beyond the Unicode classes, for what the patterns name literally.
enum ExtraFlag : std::uint16_t {
    kCrLf = 1u << 8,         // [\r\n]
    kAsciiLetter = 1u << 9,  // [A-Za-z]
    kAsciiPunct = 1u << 10,  // the first alternative's leading class
    kCjk = 1u << 11,         // step 2's class
    kSpaceChar = 1u << 12,   // the literal ' ' of " ?"
};

inline constexpr std::uint16_t kL = kClassL, kM = kClassM, kN = kClassN, kP = kClassP, kS = kClassS,
                               kSpace = kClassSpace;

struct AsciiTable {
    std::uint16_t flags[128];
    // Whether [\p{L}\p{M}] is [A-Za-z] in ASCII, as asciiLetterRunEnd assumes:
    // a regenerated class table that disagrees turns the block scan off.
    bool letters_are_az = true;
    // Whether the classes windowPieces computes from byte values agree with
    // the table on every ASCII character it accepts (see there).
    bool window_classes_agree = true;
    AsciiTable() {
        for (unsigned c = 0; c < 128; ++c) {
            std::uint16_t f = unicodeClasses(c);
            if (c == '\r' || c == '\n') f |= kCrLf;
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) f |= kAsciiLetter;
            if (std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").find(static_cast<char>(c)) !=
                std::string_view::npos) {
                f |= kAsciiPunct;
            }
            if (c == ' ') f |= kSpaceChar;
            flags[c] = f;
            if (((f & (kClassL | kClassM)) != 0) != ((f & kAsciiLetter) != 0)) letters_are_az = false;
            const std::uint16_t classes = f & (kClassL | kClassM | kClassN | kClassP | kClassS | kClassSpace);
            const bool digit = c >= '0' && c <= '9';
            const bool space = (c >= '\t' && c <= '\r') || c == ' ';
            const bool graphic = c > ' ' && c < 0x7f;
            if ((f & kAsciiLetter) ? classes != kClassL
                : digit            ? classes != kClassN
                : graphic          ? (classes & ~(kClassP | kClassS)) != 0 || classes == 0
                : space            ? classes != kClassSpace
                                   : false) {
                window_classes_agree = false;
            }
        }
    }
};
inline const AsciiTable kAscii;

inline bool isCjk(std::uint32_t cp) { return (cp >= 0x4e00 && cp <= 0x9fa5) || (cp >= 0x3040 && cp <= 0x30ff); }

struct Char {
    std::uint16_t flags;
    unsigned len;
};

inline Char charAt(const unsigned char* p) {
    if (*p < 0x80) return {kAscii.flags[*p], 1};
    unsigned len;
    const std::uint32_t cp = decodeUtf8(p, len);
    std::uint16_t f = unicodeClasses(cp);
    if (isCjk(cp)) f |= kCjk;
    return {f, len};
}

}  // namespace dpgate::admission::splitter_detail
