#include "admission/tokenizer/deepseek_v3_splitter.hpp"

#include <algorithm>

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

using SplitState = DeepSeekV3Splitter::State;

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

    // Appends the pieces from `begin` (a piece start) to the region's end and
    // returns the end, or stops at a piece start once piece_ends holds
    // `limit` entries and returns that start: splitting again from there
    // gives the same pieces (matchAt looks at nothing before its start).
    std::uint32_t split(std::uint32_t begin, std::vector<std::uint32_t>& piece_ends, std::size_t limit) const {
        std::uint32_t i = begin;
        std::uint32_t gap_start = begin;
        while (i < end_) {
            if (gap_start == i && piece_ends.size() >= limit) return i;
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
        return end_;
    }

private:
    const unsigned char* s_;
    std::uint32_t end_;
};

// The ASCII fast path (without it the splitter is a fifth of a cold count
// of mostly-ASCII text, classifying every character twice, once to find its
// region and once in RegionSplitter). From a piece start whose first byte is
// ASCII, the end of the piece RegionSplitter would find, or 0 when that
// depends on a non-ASCII character (the caller then takes the general path
// from the same start, which gives the same pieces: no pattern looks behind).
// The region end, where \s+(?!\S) takes the whole run, is a digit or a
// non-ASCII character here; the former ends a run like the end of the text.
// Follows matchAt's alternatives in order.
inline bool asciiHas(unsigned char b, std::uint16_t mask) { return b < 0x80 && (kAscii.flags[b] & mask); }

#if defined(__SSE2__)
// Bytes v in [lo, hi], as a compare mask: v - lo + 128 is signed below
// hi - lo + 1 - 128 exactly then.
inline __m128i bytesInRange(__m128i v, int lo, int hi) {
    return _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8(static_cast<char>(128 - lo))),
                          _mm_set1_epi8(static_cast<char>(hi - lo + 1 - 128)));
}

// [A-Za-z] among 16 bytes: case folded ('A'..'Z' -> 'a'..'z'), then one range.
inline __m128i asciiLetters(__m128i v) { return bytesInRange(_mm_or_si128(v, _mm_set1_epi8(0x20)), 'a', 'z'); }
#endif

// The first offset from j (up to n) whose byte is not an ASCII character of
// `letters`: kAsciiLetter ([A-Za-z]) or kL | kM, the same set unless the class
// table says otherwise (AsciiTable checks). Sixteen bytes at a time: the end
// of a word, byte by byte, is an unpredictable branch per piece.
inline std::uint32_t asciiLetterRunEnd(const unsigned char* s, std::uint32_t j, std::uint32_t n,
                                       std::uint16_t letters) {
#if defined(__SSE2__)
    while ((letters == kAsciiLetter || kAscii.letters_are_az) && j + 16 <= n) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j));
        const __m128i is_letter = asciiLetters(bytes);
        const unsigned others = ~static_cast<unsigned>(_mm_movemask_epi8(is_letter)) & 0xffffu;
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

#if defined(__SSE2__)
// Sixty-four bytes at a time (the byte-wise path above mispredicts
// a branch or two per piece, and pieces average four bytes). In ASCII text
// without control characters, with every whitespace run "CR/LF first, then
// blanks", whether a piece starts at a byte depends only on its neighbours,
// and the pieces follow from class masks. From a piece start, the ASCII
// alternatives give (blank = whitespace but CR and LF):
//   - a digit run starts a piece, and every third digit after (step 1);
//   - a letter starts one unless it follows a letter, a blank (which takes it
//     as [^\r\n\p{L}\p{P}\p{S}]?) or a punctuation character that itself
//     starts a piece ([!"#...~][A-Za-z]+);
//   - punctuation starts one unless it follows punctuation (one [\p{P}\p{S}]+
//     run) or a space (' ?');
//   - CR/LF starts one unless it follows CR/LF or punctuation ([\r\n]* after
//     the run): \s*[\r\n]+ takes all of them, blanks follow;
//   - a blank starts one when it follows no blank, and when it is the last
//     of two or more before a letter or punctuation (\s+(?!\S) leaves it for
//     the word); before a digit, the run ends its step-1 segment and stays whole.
// A whitespace run with CR/LF after a blank (\s*[\r\n]+ then reaches back
// over blanks), any other byte and a run still open at the window's end are
// decided the byte-wise way: windowPieces vouches only for the starts before
// them.
struct WindowMasks {
    std::uint64_t letter = 0;  // [A-Za-z]
    std::uint64_t digit = 0;
    std::uint64_t punct = 0;  // the 32 ASCII punctuation and symbol characters
    std::uint64_t space = 0;  // ' '
    std::uint64_t blank = 0;  // \t \v \f ' '
    std::uint64_t crlf = 0;
};

inline WindowMasks classifyWindow(const unsigned char* s) {
    WindowMasks m;
    for (unsigned k = 0; k < 4; ++k) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * k));
        const __m128i letter = asciiLetters(v);
        const __m128i digit = bytesInRange(v, '0', '9');
        const __m128i punct = _mm_andnot_si128(_mm_or_si128(letter, digit), bytesInRange(v, '!', '~'));
        const __m128i space = _mm_cmpeq_epi8(v, _mm_set1_epi8(' '));
        const __m128i lf = _mm_cmpeq_epi8(v, _mm_set1_epi8('\n'));
        const __m128i crlf = _mm_or_si128(lf, _mm_cmpeq_epi8(v, _mm_set1_epi8('\r')));
        const __m128i blank = _mm_or_si128(space, _mm_andnot_si128(lf, bytesInRange(v, '\t', '\f')));
        const auto bits = [&](__m128i mask) {
            return static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(mask))) << (16 * k);
        };
        m.letter |= bits(letter);
        m.digit |= bits(digit);
        m.punct |= bits(punct);
        m.space |= bits(space);
        m.blank |= bits(blank);
        m.crlf |= bits(crlf);
    }
    return m;
}

// The start of the run of `run` that ends just below bit x (x itself if bit
// x - 1 is not in the run).
inline unsigned runStartBelow(std::uint64_t run, unsigned x) {
    const std::uint64_t below = x >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << x) - 1;
    const std::uint64_t others = ~run & below;
    return others == 0 ? 0 : 64 - static_cast<unsigned>(__builtin_clzll(others));
}

// From a piece start at s (with s[64] readable): appends the ends of the
// pieces it can vouch for, offset by `pos`, and returns the last one (0: none,
// take one piece the byte-wise way). `unsure` is set to the offset of the
// first byte it could not classify (65 if none).
inline std::uint32_t windowPieces(const unsigned char* s, std::uint32_t pos, std::vector<std::uint32_t>& piece_ends,
                                  unsigned& unsure) {
    const WindowMasks m = classifyWindow(s);
    const std::uint64_t white = m.blank | m.crlf;
    const std::uint64_t known = m.letter | m.digit | m.punct | white;
    const unsigned char next = s[64];
    const std::uint16_t next_flags = next < 0x80 ? kAscii.flags[next] : 0;
    const bool next_known = next > ' ' ? next < 0x7f : (next >= '\t' && next <= '\r') || next == ' ';
    const bool next_white = next_known && (next_flags & kSpace);
    const bool next_word = next_known && !(next_flags & (kSpace | kN));  // a letter or punctuation
    const auto prev = [](std::uint64_t x) { return x << 1; };

    const std::uint64_t punct_start = m.punct & ~prev(m.punct) & ~prev(m.space);
    std::uint64_t starts = 1;
    starts |= m.digit & ~prev(m.digit);
    starts |= punct_start;
    starts |= m.letter & ~prev(m.letter | m.blank | punct_start);
    starts |= m.crlf & ~prev(m.crlf | m.punct);
    starts |= m.blank & ~prev(m.blank);
    const std::uint64_t word_after = (~(white | m.digit) >> 1) | (next_word ? std::uint64_t{1} << 63 : 0);
    starts |= m.blank & prev(m.blank) & word_after;
    // Digit runs longer than three: a piece every three digits from the run's start.
    for (std::uint64_t long_runs = m.digit & prev(m.digit) & (m.digit << 2) & (m.digit << 3); long_runs != 0;) {
        const auto fourth = static_cast<unsigned>(__builtin_ctzll(long_runs));
        const unsigned start = runStartBelow(m.digit, fourth + 1);
        const std::uint64_t after = ~m.digit & ~((std::uint64_t{1} << fourth) - 1);
        const unsigned end = after == 0 ? 64 : static_cast<unsigned>(__builtin_ctzll(after));
        for (unsigned k = start + 3; k < end; k += 3) starts |= std::uint64_t{1} << k;
        long_runs &= end == 64 ? 0 : ~((std::uint64_t{2} << end) - 1);
    }

    // The last offset whose start is decided by what the window shows. Only
    // a blank's start looks at the byte after it, and a whitespace run must be
    // seen whole (\s*[\r\n]+ ends at its last CR/LF): a run touching a byte
    // the window could not classify, or its end, is left to the next call.
    unsure = known == ~std::uint64_t{0} ? (next_known ? 65 : 64) : static_cast<unsigned>(__builtin_ctzll(~known));
    int last = std::min(63, static_cast<int>(unsure) - 1);
    if (unsure <= 64 && unsure >= 1 && ((white >> (unsure - 1)) & 1)) {
        last = std::min(last, static_cast<int>(runStartBelow(white, unsure)));
    }
    if (const std::uint64_t reaching_back = m.crlf & prev(m.blank); reaching_back != 0) {
        last = std::min(last, static_cast<int>(runStartBelow(white, __builtin_ctzll(reaching_back) + 1)));
    }
    if (next_white && (white >> 63)) last = std::min(last, static_cast<int>(runStartBelow(white, 64)));
    if (last <= 0) return 0;
    const std::uint64_t vouched = starts & ((std::uint64_t{2} << last) - 1) & ~std::uint64_t{1};
    if (vouched == 0) return 0;
    for (std::uint64_t rest = vouched; rest != 0; rest &= rest - 1) {
        piece_ends.push_back(pos + static_cast<std::uint32_t>(__builtin_ctzll(rest)));
    }
    return 63 - static_cast<std::uint32_t>(__builtin_clzll(vouched));
}
#endif

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

// Splits from state.pos until the text ends or piece_ends holds `limit`
// entries (then a few more may follow: a window's pieces, a match and the
// gap before it), leaving in `state` where to go on.
template <bool kAsciiFastPath>
void split(std::string_view text, SplitState& state, std::vector<std::uint32_t>& piece_ends, std::size_t limit) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const auto n = static_cast<std::uint32_t>(text.size());
    const bool ideograph_shortcut = ideographsAreOnlyLetters();
    std::uint32_t window_from = state.window_from;
    std::uint32_t pos = state.pos;
    while (pos < n && piece_ends.size() < limit) {
        if (pos < state.region_end) {  // a region the last call stopped inside
            pos = RegionSplitter(s, state.region_end).split(pos, piece_ends, limit);
            continue;
        }
        if (kAsciiFastPath && s[pos] < 0x80) {
#if defined(__SSE2__)
            if (pos >= window_from && n - pos > 64) {
                const auto high = static_cast<unsigned>(
                    _mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + pos))));
                unsigned unsure = 0;
                if (high != 0) {
                    window_from = pos + static_cast<std::uint32_t>(__builtin_ctz(high));
                } else if (const std::uint32_t last = windowPieces(s + pos, pos, piece_ends, unsure); last != 0) {
                    pos += last;
                    continue;
                } else {
                    window_from = pos + unsure;
                }
            }
#endif
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
        state.region_end = end;
        pos = RegionSplitter(s, end).split(pos, piece_ends, limit);
    }
    state.pos = pos;
    state.window_from = window_from;
}

}  // namespace

DeepSeekV3Splitter::DeepSeekV3Splitter(std::string_view text) : text_(text) {
    // Where windowPieces may be tried next: after it vouched for nothing, not
    // before the byte it could not classify; and not before a non-ASCII byte
    // in the next sixteen (ASCII between CJK or Cyrillic words), where it
    // would vouch for little.
    state_.window_from = kAscii.window_classes_agree ? 0 : static_cast<std::uint32_t>(text.size());
}

bool DeepSeekV3Splitter::next(std::vector<std::uint32_t>& piece_ends, std::size_t batch) {
    const std::size_t before = piece_ends.size();
    split<true>(text_, state_, piece_ends, before + batch);
    return piece_ends.size() > before;
}

void splitDeepSeekV3(std::string_view text, std::vector<std::uint32_t>& piece_ends) {
    DeepSeekV3Splitter(text).next(piece_ends, static_cast<std::size_t>(-1) - piece_ends.size());
}

void splitDeepSeekV3ByRegions(std::string_view text, std::vector<std::uint32_t>& piece_ends) {
    SplitState state;
    state.window_from = static_cast<std::uint32_t>(text.size());
    split<false>(text, state, piece_ends, static_cast<std::size_t>(-1));
}

}  // namespace dpgate::admission
