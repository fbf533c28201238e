#pragma once
// The fast path of the usage reader's scans (stream_usage.cpp, whose byte
// loops are its plain twin): sixteen bytes judged at once with SSE2, which
// is part of x86-64 (other targets take the byte loops alone). Each goes
// only as far as whole blocks allow and leaves the rest to the byte loop,
// so the two ways stop at the same byte. The fast path stream_usage_sse2
// (common/fast_paths.hpp); stream_usage_test compares the two ways, and the
// usage fuzz target runs the reader over its corpus with the fast path on.
#include <cstddef>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dpgate::gateway {

// Where `needle` (two bytes or more) first occurs in `text` at a start from
// i to `last` among the whole 16-position blocks from i, or npos with i past
// those blocks. Candidates are where the needle's first two bytes occur;
// each is then compared whole. std::string_view::find stops at every
// occurrence of the first byte alone, and an event's JSON is full of the
// quote that starts `"usage"`; glibc's memmem is plain C here (the search
// took a third of the instructions an SSE event cost the relay).
inline size_t findInSse2(std::string_view text, std::string_view needle, size_t& i, size_t last) {
#if defined(__SSE2__)
    const size_t n = needle.size();
    const __m128i first = _mm_set1_epi8(needle[0]);
    const __m128i second = _mm_set1_epi8(needle[1]);
    // Sixteen candidate starts at a time, all at or before `last`; the
    // second load reads one byte further, which n >= 2 keeps inside text.
    for (; i + 16 <= last + 1; i += 16) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i + 1));
        auto pairs = unsigned(_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, second))));
        while (pairs != 0) {
            const size_t at = i + size_t(__builtin_ctz(pairs));
            if (std::memcmp(text.data() + at + 2, needle.data() + 2, n - 2) == 0) return at;
            pairs &= pairs - 1;
        }
    }
#else
    (void)text, (void)needle, (void)i, (void)last;
#endif
    return std::string_view::npos;
}

// From `from`, the first CR or LF in the whole 16-byte blocks of `text`, or
// the end of those blocks.
inline size_t lineEndSse2(std::string_view text, size_t from) {
    size_t i = from;
#if defined(__SSE2__)
    const __m128i lf = _mm_set1_epi8('\n');
    const __m128i cr = _mm_set1_epi8('\r');
    for (; i + 16 <= text.size(); i += 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
        if (const auto ends = unsigned(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, lf), _mm_cmpeq_epi8(x, cr)))))
            return i + size_t(__builtin_ctz(ends));
    }
#else
    (void)text;
#endif
    return i;
}

// Moves `at` onto the last quote before it in the whole 16-byte blocks below
// it: true when there is one; else false with `at` below 16.
inline bool previousQuoteSse2(std::string_view text, size_t& at) {
#if defined(__SSE2__)
    for (; at >= 16; at -= 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + at - 16));
        if (const auto quotes = unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('"'))))) {
            at = at - 16 + size_t(31 - __builtin_clz(quotes));
            return true;
        }
    }
#else
    (void)text, (void)at;
#endif
    return false;
}

}  // namespace dpgate::gateway
