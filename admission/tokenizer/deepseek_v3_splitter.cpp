#include "admission/tokenizer/deepseek_v3_splitter.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "admission/tokenizer/unicode_classes.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace dpgate::admission {

const std::array<std::string_view, 3> kDeepSeekV3SplitPatterns = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

namespace {

// Flags beyond the Unicode classes, for what the patterns name literally.
enum ExtraFlag : std::uint16_t {
    kCrLf = 1u << 8,         // [\r\n]
    kAsciiLetter = 1u << 9,  // [A-Za-z]
    kAsciiPunct = 1u << 10,  // the first alternative's leading class
    kCjk = 1u << 11,         // step 2's class
    kSpaceChar = 1u << 12,   // the literal ' ' of " ?"
};

constexpr std::uint16_t kL = kClassL, kM = kClassM, kN = kClassN, kP = kClassP, kS = kClassS, kSpace = kClassSpace;

struct AsciiTable {
    std::uint16_t flags[128];
    // Whether [\p{L}\p{M}] is [A-Za-z] in ASCII, as asciiLetterRunEnd assumes:
    // a regenerated class table that disagrees turns the block scan off.
    bool letters_are_az = true;
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
        }
    }
};
const AsciiTable kAscii;

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

class RegionSplitter {
public:
    RegionSplitter(const unsigned char* base, std::uint32_t end) : s_(base), end_(end) {}

    std::uint32_t scan(std::uint32_t i, std::uint16_t mask) const {
        while (i < end_) {
            const Char c = charAt(s_ + i);
            if (!(c.flags & mask)) break;
            i += c.len;
        }
        return i;
    }

    // End of the step-3 match starting at i, or 0 when no alternative matches.
    std::uint32_t matchAt(std::uint32_t i) const {
        const Char c0 = charAt(s_ + i);
        const std::uint32_t e0 = i + c0.len;
        // [!"#...~][A-Za-z]+
        if (c0.flags & kAsciiPunct) {
            std::uint32_t j = e0;
            while (j < end_ && s_[j] < 0x80 && (kAscii.flags[s_[j]] & kAsciiLetter)) ++j;
            if (j > e0) return j;
        }
        // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
        if (!(c0.flags & (kCrLf | kL | kP | kS))) {
            const std::uint32_t j = scan(e0, kL | kM);
            if (j > e0) return j;
        }
        if (c0.flags & (kL | kM)) return scan(e0, kL | kM);
        // ' ?[\p{P}\p{S}]+[\r\n]*'
        if ((c0.flags & kSpaceChar) && e0 < end_) {
            const std::uint32_t j = scan(e0, kP | kS);
            if (j > e0) return scanCrLf(j);
        }
        if (c0.flags & (kP | kS)) return scanCrLf(scan(e0, kP | kS));
        if (c0.flags & kSpace) {
            // \s*[\r\n]+ ends after the run's last CR/LF; otherwise \s+(?!\S)
            // leaves the run's last character for the next word unless the run
            // ends the piece, and a lone character falls through to \s+.
            std::uint32_t j = i;
            std::uint32_t last_crlf_end = 0;
            std::uint32_t last_start = i;
            unsigned count = 0;
            while (j < end_) {
                const Char c = charAt(s_ + j);
                if (!(c.flags & kSpace)) break;
                if (c.flags & kCrLf) last_crlf_end = j + c.len;
                last_start = j;
                j += c.len;
                ++count;
            }
            if (last_crlf_end != 0) return last_crlf_end;
            if (j == end_ || count == 1) return j;
            return last_start;
        }
        return 0;
    }

    std::uint32_t scanCrLf(std::uint32_t j) const {
        while (j < end_ && (s_[j] == '\r' || s_[j] == '\n')) ++j;
        return j;
    }

    void split(std::uint32_t begin, std::vector<std::uint32_t>& piece_ends) const {
        std::uint32_t i = begin;
        std::uint32_t gap_start = begin;
        while (i < end_) {
            const std::uint32_t m = matchAt(i);
            if (m != 0) {
                if (gap_start < i) piece_ends.push_back(i);
                piece_ends.push_back(m);
                i = m;
                gap_start = m;
            } else {
                i += charAt(s_ + i).len;
            }
        }
        if (gap_start < end_) piece_ends.push_back(end_);
    }

private:
    const unsigned char* s_;
    std::uint32_t end_;
};

// The ASCII fast path (issue 18: the splitter was a fifth of a cold count of
// mostly-ASCII text, classifying every character twice, once to find its
// region and once in RegionSplitter). From a piece start whose first byte is
// ASCII, the end of the piece RegionSplitter would find, or 0 when that
// depends on a non-ASCII character (the caller then takes the general path
// from the same start, which gives the same pieces: no pattern looks behind).
// The region end, where \s+(?!\S) takes the whole run, is a digit or a
// non-ASCII character here; the former ends a run like the end of the text.
// Follows matchAt's alternatives in order.
inline bool asciiHas(unsigned char b, std::uint16_t mask) { return b < 0x80 && (kAscii.flags[b] & mask); }

// The first offset from j (up to n) whose byte is not an ASCII character of
// `letters`: kAsciiLetter ([A-Za-z]) or kL | kM, the same set unless the class
// table says otherwise (AsciiTable checks). Sixteen bytes at a time: the end
// of a word, byte by byte, was an unpredictable branch per piece.
inline std::uint32_t asciiLetterRunEnd(const unsigned char* s, std::uint32_t j, std::uint32_t n,
                                       std::uint16_t letters) {
#if defined(__SSE2__)
    while ((letters == kAsciiLetter || kAscii.letters_are_az) && j + 16 <= n) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j));
        // Fold case ('A'..'Z' -> 'a'..'z'), then 'a'..'z' + 31 is the signed
        // range -128..-103 and nothing else lands there.
        const __m128i folded = _mm_or_si128(bytes, _mm_set1_epi8(0x20));
        const __m128i shifted = _mm_add_epi8(folded, _mm_set1_epi8(31));
        const __m128i letters = _mm_cmplt_epi8(shifted, _mm_set1_epi8(-102));
        const unsigned others = ~static_cast<unsigned>(_mm_movemask_epi8(letters)) & 0xffffu;
        if (others != 0) return j + static_cast<std::uint32_t>(__builtin_ctz(others));
        j += 16;
    }
#endif
    while (j < n && asciiHas(s[j], letters)) ++j;
    return j;
}

inline std::uint32_t asciiPieceEnd(const unsigned char* s, std::uint32_t pos, std::uint32_t n) {
    const std::uint16_t f0 = kAscii.flags[s[pos]];
    const std::uint32_t e0 = pos + 1;
    std::uint32_t j = e0;
    // Whether the run scanned up to j stopped at a non-ASCII character, which
    // might have continued it.
    const auto open = [&] { return j < n && s[j] >= 0x80; };
    if (f0 & kN) {  // step 1: \p{N}{1,3}
        while (j < n && j < pos + 3 && asciiHas(s[j], kN)) ++j;
        return j < pos + 3 && open() ? 0 : j;
    }
    if (f0 & kAsciiPunct) {  // [!"#...~][A-Za-z]+, ASCII letters only
        j = asciiLetterRunEnd(s, j, n, kAsciiLetter);
        if (j > e0) return j;
    }
    if (!(f0 & (kCrLf | kL | kP | kS)) || (f0 & (kL | kM))) {  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
        j = asciiLetterRunEnd(s, j, n, kL | kM);
        if (open()) return 0;
        if (j > e0 || (f0 & (kL | kM))) return j;
    }
    if (((f0 & kSpaceChar) && e0 < n) || (f0 & (kP | kS))) {  // ' ?[\p{P}\p{S}]+[\r\n]*'
        while (j < n && asciiHas(s[j], kP | kS)) ++j;
        if (open()) return 0;
        if (j > e0 || (f0 & (kP | kS))) {
            while (j < n && (s[j] == '\r' || s[j] == '\n')) ++j;
            return j;
        }
    }
    if (f0 & kSpace) {  // \s*[\r\n]+ | \s+(?!\S) | \s+, as in matchAt
        std::uint32_t last_crlf_end = (f0 & kCrLf) ? e0 : 0;
        std::uint32_t last_start = pos;
        unsigned count = 1;
        while (j < n && asciiHas(s[j], kSpace)) {
            if (kAscii.flags[s[j]] & kCrLf) last_crlf_end = j + 1;
            last_start = j;
            ++j;
            ++count;
        }
        if (open()) return 0;
        if (last_crlf_end != 0) return last_crlf_end;
        if (j == n || asciiHas(s[j], kN) || count == 1) return j;
        return last_start;
    }
    return 0;  // a gap: the general path collects it
}

// Length of the run of CJK unified ideographs (U+4E00..U+9FA5) at s[pos..n),
// in bytes. These are the bulk of Chinese text; every one is 3 bytes, lead
// byte 0xe4..0xe9, and of class L alone, so a run of them followed by no
// other CJK-class character is one region that step 3 keeps whole (its
// [\p{L}\p{M}]+ alternative). Decoding them here skips two table lookups
// per character.
inline std::uint32_t ideographRun(const unsigned char* s, std::uint32_t pos, std::uint32_t n) {
    std::uint32_t i = pos;
    while (i + 3 <= n && s[i] - 0xe4u <= 0xe9u - 0xe4u) {
        const std::uint32_t cp = ((s[i] & 0x0fu) << 12) | ((s[i + 1] & 0x3fu) << 6) | (s[i + 2] & 0x3fu);
        if (cp < 0x4e00 || cp > 0x9fa5) break;
        i += 3;
    }
    return i - pos;
}

// The shortcut above assumes the class table agrees; checked once, so a
// regenerated table that disagrees turns the shortcut off, not wrong.
bool ideographsAreOnlyLetters() {
    static const bool only_letters = [] {
        for (std::uint32_t cp = 0x4e00; cp <= 0x9fa5; ++cp) {
            if (unicodeClasses(cp) != kL) return false;
        }
        return true;
    }();
    return only_letters;
}

template <bool kAsciiFastPath>
void split(std::string_view text, std::vector<std::uint32_t>& piece_ends) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const auto n = static_cast<std::uint32_t>(text.size());
    const bool ideograph_shortcut = ideographsAreOnlyLetters();
    std::uint32_t pos = 0;
    while (pos < n) {
        if (kAsciiFastPath && s[pos] < 0x80) {
            if (const std::uint32_t end = asciiPieceEnd(s, pos, n); end != 0) {
                piece_ends.push_back(end);
                pos = end;
                continue;
            }
        }
        if (ideograph_shortcut) {
            if (const std::uint32_t run = ideographRun(s, pos, n); run != 0) {
                const std::uint32_t end = pos + run;
                if (end == n || !(charAt(s + end).flags & kCjk)) {
                    piece_ends.push_back(end);
                    pos = end;
                    continue;
                }
            }
        }
        Char c = charAt(s + pos);
        if (c.flags & kN) {
            // Step 1: runs of numbers, three at a time.
            unsigned taken = 0;
            while (pos < n && taken < 3) {
                c = charAt(s + pos);
                if (!(c.flags & kN)) break;
                pos += c.len;
                ++taken;
            }
            piece_ends.push_back(pos);
            continue;
        }
        // Steps 2 and 3: a region is a maximal run that is all CJK or all
        // non-CJK (and never a number); step 3 runs inside each region alone.
        const std::uint16_t cjk = c.flags & kCjk;
        std::uint32_t end = pos + c.len;
        while (end < n) {
            const Char d = charAt(s + end);
            if ((d.flags & kN) || (d.flags & kCjk) != cjk) break;
            end += d.len;
        }
        RegionSplitter(s, end).split(pos, piece_ends);
        pos = end;
    }
}

}  // namespace

void splitDeepSeekV3(std::string_view text, std::vector<std::uint32_t>& piece_ends) { split<true>(text, piece_ends); }

void splitDeepSeekV3ByRegions(std::string_view text, std::vector<std::uint32_t>& piece_ends) {
    split<false>(text, piece_ends);
}

}  // namespace dpgate::admission
