#pragma once
// The fast path of the DeepSeek V3 splitter (deepseek_v3_splitter.cpp, whose
// RegionSplitter is its plain twin: every piece found by regions and
// matchAt, the regex's alternatives tried in order). Three shortcuts, each
// finding exactly the pieces RegionSplitter finds from the same start, or
// declining (then the plain way takes that piece): ASCII pieces byte by
// byte (asciiPieceEnd), ASCII text sixty-four bytes at a time
// (windowPieces), and runs of CJK ideographs (ideographRun). The fast path
// deepseek_v3_splitter_fast_path (common/fast_paths.hpp); the splitter
// tests and the tokenizer fuzz target compare the two ways.
#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "admission/tokenizer/deepseek_v3_split_classes.hpp"

namespace dpgate::admission::splitter_detail {

// ASCII pieces byte by byte: RegionSplitter classifies every character
// twice, once to find its region and once to match it, and that was a fifth
// of a cold count of mostly-ASCII text. From a piece start whose first byte is
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
// Sixty-four bytes at a time: the byte-wise path above mispredicts a branch
// or two per piece, and pieces average four bytes. In ASCII text
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

// From a piece start `pos` (an ASCII byte) with more than 64 bytes after
// it: the pieces of the window there that windowPieces vouches for, and the
// start after them; 0 when it vouched for none (then `window_from` moves past
// what stopped it: not before the byte it could not classify, nor before a
// non-ASCII byte among the next sixteen, where it would vouch for little).
inline std::uint32_t windowStep(const unsigned char* s, std::uint32_t n, std::uint32_t pos, std::uint32_t& window_from,
                                std::vector<std::uint32_t>& piece_ends) {
#if defined(__SSE2__)
    if (pos >= window_from && n - pos > 64) {
        const auto high =
            static_cast<unsigned>(_mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + pos))));
        unsigned unsure = 0;
        if (high != 0) {
            window_from = pos + static_cast<std::uint32_t>(__builtin_ctz(high));
        } else if (const std::uint32_t last = windowPieces(s + pos, pos, piece_ends, unsure); last != 0) {
            return pos + last;
        } else {
            window_from = pos + unsure;
        }
    }
#else
    (void)s, (void)n, (void)pos, (void)window_from, (void)piece_ends;
#endif
    return 0;
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
inline bool ideographsAreOnlyLetters() {
    static const bool only_letters = [] {
        for (std::uint32_t cp = 0x4e00; cp <= 0x9fa5; ++cp) {
            if (unicodeClasses(cp) != kL) return false;
        }
        return true;
    }();
    return only_letters;
}

}  // namespace dpgate::admission::splitter_detail
