#pragma once
// A fast non-cryptographic 128-bit hash for cache keys (segment and word
// caches). Two 64-bit lanes over the same bytes, each a multiply-fold mix, so
// a cache hit needs both lanes and the length to collide.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "routing/hash64.hpp"

namespace dpgate::admission {

struct Hash128 {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    friend bool operator==(const Hash128&, const Hash128&) = default;
};

// The multiply-fold steps are routing's (routing/hash64.hpp), shared by the
// conversation head key.
namespace hash_detail {
using namespace routing::hash_detail;
}  // namespace hash_detail

inline std::uint64_t hash64(std::string_view bytes) {
    using namespace hash_detail;
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    return foldRest(p, bytes.size(), kK0 ^ (bytes.size() * kK1));
}

inline Hash128 hash128(std::string_view bytes) {
    using namespace hash_detail;
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t n = bytes.size();
    std::uint64_t a = kK0 ^ n;
    std::uint64_t b = kK2 ^ (n * kK3);
    while (n >= 16) {
        const std::uint64_t w0 = load64(p);
        const std::uint64_t w1 = load64(p + 8);
        a = fold(w0 ^ kK1, w1 ^ a);
        b = fold(w1 ^ kK3, w0 ^ b ^ kK0);
        p += 16;
        n -= 16;
    }
    std::uint64_t t0 = n >= 8 ? load64(p) : loadTail(p, n);
    std::uint64_t t1 = n > 8 ? loadTail(p + 8, n - 8) : 0;
    a = fold(t0 ^ kK2, t1 ^ a ^ kK1);
    b = fold(t1 ^ kK0, t0 ^ b ^ kK2);
    return {fold(a, kK3) ^ b, fold(b, kK1) ^ a};
}

}  // namespace dpgate::admission
