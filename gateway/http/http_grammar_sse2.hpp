#pragma once
// The fast path of the head parsers' scans (http_grammar.hpp, whose byte
// loops are its plain twin): sixteen bytes judged at once with SSE2, which
// is part of x86-64 (other targets take the byte loops alone). A call to
// memchr per line, or a compare per byte of a value, cost more than the
// line's whole scan. Each function goes only as far as whole blocks before
// `end` allow and leaves the rest to the byte loop, so the two ways stop at
// the same byte. The fast path http_grammar_sse2 (common/fast_paths.hpp);
// http_grammar_test runs both ways on every byte value.
#include <cstddef>
#include <cstdint>
#include <optional>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dpgate::gateway::grammar {

// The LFs in the 16-byte blocks of begin[from, size), each given to
// `judge(i)` in order (1: it ends the head, -1: refused, 0: go on): the
// head's end (or 0) once one decides, else nullopt with `from` past the
// blocks.
template <class Judge>
std::optional<size_t> judgeLfsSse2(const char* begin, size_t size, size_t& from, Judge&& judge) {
#if defined(__SSE2__)
    for (; size - from >= 16; from += 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(begin + from));
        for (auto lfs = unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('\n')))); lfs != 0; lfs &= lfs - 1) {
            const size_t i = from + size_t(__builtin_ctz(lfs));
            if (const int verdict = judge(i)) return verdict > 0 ? i + 1 : 0;
        }
    }
#else
    (void)begin, (void)size, (void)from, (void)judge;
#endif
    return std::nullopt;
}

// Past the whole blocks of a target's run (kValue false: visible ASCII and
// obs-text) or a value's (kValue true: SP and HTAB too) from p, stopping at
// the first byte outside it in a block wholly before `end`.
template <bool kValue>
const char* skipRunSse2(const char* p, const char* end) {
#if defined(__SSE2__)
    // Outside the run: the controls 0x00-0x1f and DEL, and for a target SP
    // too; a value holds SP and HTAB. The compares are signed, so obs-text
    // (0x80-0xff) is below zero and stays in the run.
    const __m128i below = _mm_set1_epi8(kValue ? 0x20 : 0x21);
    while (end - p >= 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        __m128i out = _mm_andnot_si128(_mm_cmplt_epi8(x, _mm_setzero_si128()), _mm_cmplt_epi8(x, below));
        if constexpr (kValue) out = _mm_andnot_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\t')), out);
        out = _mm_or_si128(out, _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f)));
        if (const int mask = _mm_movemask_epi8(out)) return p + __builtin_ctz(unsigned(mask));
        p += 16;
    }
#else
    (void)end;
#endif
    return p;
}

// Past the whole blocks of letters, digits and '-' from p (the bytes of
// nearly every field name), stopping at the first other byte in a block
// wholly before `end`.
inline const char* skipTokenSse2(const char* p, const char* end) {
#if defined(__SSE2__)
    while (end - p >= 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        // Signed compares: bytes 0x80-0xff are below zero, outside every range.
        const __m128i folded = _mm_or_si128(x, _mm_set1_epi8(0x20));  // 'A'-'Z' onto 'a'-'z'
        const __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(folded, _mm_set1_epi8('a' - 1)),
                                             _mm_cmplt_epi8(folded, _mm_set1_epi8('z' + 1)));
        const __m128i digit =
            _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
        const __m128i in = _mm_or_si128(_mm_or_si128(letter, digit), _mm_cmpeq_epi8(x, _mm_set1_epi8('-')));
        if (const int mask = ~_mm_movemask_epi8(in) & 0xffff) return p + __builtin_ctz(unsigned(mask));
        p += 16;
    }
#else
    (void)end;
#endif
    return p;
}

}  // namespace dpgate::gateway::grammar
