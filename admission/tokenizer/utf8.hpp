#pragma once
// UTF-8 validation and decoding. The tokenizer only ever sees validated text:
// invalid input is refused up front, never tokenized approximately.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dpgate::admission {

inline constexpr std::size_t kValidUtf8 = static_cast<std::size_t>(-1);

// Byte offset of the first ill-formed sequence (overlong forms, surrogates,
// values above U+10FFFF and truncated sequences included), or kValidUtf8.
// With the fast path (utf8_ascii_runs.hpp) unless DPGATE_PLAIN turns
// utf8_ascii_runs off; the second form chooses (the tests compare both).
std::size_t findInvalidUtf8(std::string_view text);
std::size_t findInvalidUtf8(std::string_view text, bool fast_path);

// Decodes the scalar value at p; p must point into validated UTF-8.
inline std::uint32_t decodeUtf8(const unsigned char* p, unsigned& len) {
    const unsigned char b0 = p[0];
    if (b0 < 0x80) {
        len = 1;
        return b0;
    }
    if (b0 < 0xe0) {
        len = 2;
        return ((b0 & 0x1fu) << 6) | (p[1] & 0x3fu);
    }
    if (b0 < 0xf0) {
        len = 3;
        return ((b0 & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
    }
    len = 4;
    return ((b0 & 0x07u) << 18) | ((p[1] & 0x3fu) << 12) | ((p[2] & 0x3fu) << 6) | (p[3] & 0x3fu);
}

}  // namespace dpgate::admission
