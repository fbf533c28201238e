#include "admission/tokenizer/utf8.hpp"

#include <cstring>

namespace dpgate::admission {

std::size_t findInvalidUtf8(std::string_view text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        // ASCII fast path, eight bytes at a time.
        while (i + 8 <= n) {
            std::uint64_t word;
            std::memcpy(&word, p + i, 8);
            if (word & 0x8080808080808080ull) break;
            i += 8;
        }
        // Runs of 3-byte characters (CJK text), lead bytes whose second byte may
        // be any continuation byte (0xe0 and 0xed restrict it: general path).
        while (i + 3 <= n) {
            const unsigned char b = p[i];
            if (b - 0xe1u > 0xefu - 0xe1u || b == 0xed || (p[i + 1] & 0xc0) != 0x80 || (p[i + 2] & 0xc0) != 0x80) break;
            i += 3;
        }
        if (i >= n) break;
        const unsigned char b0 = p[i];
        if (b0 < 0x80) {
            ++i;
            continue;
        }
        auto cont = [&](std::size_t k) { return i + k < n && (p[i + k] & 0xc0) == 0x80; };
        if (b0 >= 0xc2 && b0 <= 0xdf) {
            if (!cont(1)) return i;
            i += 2;
        } else if (b0 >= 0xe0 && b0 <= 0xef) {
            if (!cont(1) || !cont(2)) return i;
            const unsigned char b1 = p[i + 1];
            if (b0 == 0xe0 && b1 < 0xa0) return i;   // overlong
            if (b0 == 0xed && b1 >= 0xa0) return i;  // UTF-16 surrogate
            i += 3;
        } else if (b0 >= 0xf0 && b0 <= 0xf4) {
            if (!cont(1) || !cont(2) || !cont(3)) return i;
            const unsigned char b1 = p[i + 1];
            if (b0 == 0xf0 && b1 < 0x90) return i;   // overlong
            if (b0 == 0xf4 && b1 >= 0x90) return i;  // above U+10FFFF
            i += 4;
        } else {
            return i;
        }
    }
    return kValidUtf8;
}

}  // namespace dpgate::admission
