#include "admission/tokenizer/utf8.hpp"

#include "admission/tokenizer/utf8_ascii_runs.hpp"
#include "common/fast_paths.hpp"

namespace dpgate::admission {

namespace {

template <bool kFastPath>
std::size_t findInvalid(std::string_view text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        if constexpr (kFastPath) i = utf8_detail::skipAsciiAndCjkRuns(p, i, n);
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

}  // namespace

std::size_t findInvalidUtf8(std::string_view text) {
    return fastPathOn(FastPath::utf8_ascii_runs) ? findInvalid<true>(text) : findInvalid<false>(text);
}

std::size_t findInvalidUtf8(std::string_view text, bool fast_path) {
    return fast_path ? findInvalid<true>(text) : findInvalid<false>(text);
}

}  // namespace dpgate::admission
