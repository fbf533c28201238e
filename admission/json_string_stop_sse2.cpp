// The SSE2 scan of jsonStringStop(). SSE2 is part of x86-64, so there is no
// dispatch; other targets take the plain loop.
#include "admission/json_string_stop.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dpgate::admission {

#if defined(__SSE2__)
namespace {

// 0xff in each byte that ends a plain run.
inline __m128i stops(__m128i bytes) {
    const __m128i quote = _mm_cmpeq_epi8(bytes, _mm_set1_epi8('"'));
    const __m128i backslash = _mm_cmpeq_epi8(bytes, _mm_set1_epi8('\\'));
    // Unsigned bytes <= 0x1f: max(b, 0x1f) == 0x1f.
    const __m128i control = _mm_cmpeq_epi8(_mm_max_epu8(bytes, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
    return _mm_or_si128(_mm_or_si128(quote, backslash), control);
}

inline __m128i load(const char* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

}  // namespace

const char* jsonStringStop(const char* p, const char* end) noexcept {
    // Four blocks per step: one test per 64 bytes keeps a long run at memory speed.
    while (end - p >= 64) {
        const __m128i a = stops(load(p));
        const __m128i b = stops(load(p + 16));
        const __m128i c = stops(load(p + 32));
        const __m128i d = stops(load(p + 48));
        if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d))) != 0) {
            const unsigned masks[4] = {
                static_cast<unsigned>(_mm_movemask_epi8(a)), static_cast<unsigned>(_mm_movemask_epi8(b)),
                static_cast<unsigned>(_mm_movemask_epi8(c)), static_cast<unsigned>(_mm_movemask_epi8(d))};
            for (int k = 0; k < 4; ++k) {
                if (masks[k] != 0) return p + 16 * k + __builtin_ctz(masks[k]);
            }
        }
        p += 64;
    }
    while (end - p >= 16) {
        const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(stops(load(p))));
        if (mask != 0) return p + __builtin_ctz(mask);
        p += 16;
    }
    return jsonStringStopPlain(p, end);
}

#else

const char* jsonStringStop(const char* p, const char* end) noexcept { return jsonStringStopPlain(p, end); }

#endif

}  // namespace dpgate::admission
