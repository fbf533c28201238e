#pragma once
// The fast path of findInvalidUtf8() (utf8.cpp, whose character-by-character
// check is its plain twin): from a character boundary, past the run of
// ASCII eight bytes at a time, then past the run of 3-byte characters whose
// lead byte allows any continuation byte (most of CJK text). Everything it
// skips the plain check accepts; it stops before anything else. The fast
// path utf8_ascii_runs (common/fast_paths.hpp); utf8_test compares the two.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dpgate::admission::utf8_detail {

inline std::size_t skipAsciiAndCjkRuns(const unsigned char* p, std::size_t i, std::size_t n) {
    while (i + 8 <= n) {
        std::uint64_t word;
        std::memcpy(&word, p + i, 8);
        if (word & 0x8080808080808080ull) break;
        i += 8;
    }
    // Lead bytes 0xe1..0xef but 0xed: 0xe0 and 0xed restrict the second byte.
    while (i + 3 <= n) {
        const unsigned char b = p[i];
        if (b - 0xe1u > 0xefu - 0xe1u || b == 0xed || (p[i + 1] & 0xc0) != 0x80 || (p[i + 2] & 0xc0) != 0x80) break;
        i += 3;
    }
    return i;
}

}  // namespace dpgate::admission::utf8_detail
