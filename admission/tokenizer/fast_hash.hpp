#pragma once
// A fast non-cryptographic 128-bit hash for cache keys (segment and word
// caches). Two 64-bit lanes over the same bytes, each a multiply-fold mix, so
// a cache hit needs both lanes and the length to collide.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace dpgate::admission {

struct Hash128 {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    friend bool operator==(const Hash128&, const Hash128&) = default;
};

namespace hash_detail {
__extension__ typedef unsigned __int128 U128;  // GCC/Clang; __extension__ keeps -Wpedantic quiet
inline std::uint64_t fold(std::uint64_t a, std::uint64_t b) {
    const U128 product = static_cast<U128>(a) * b;
    return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
}
inline std::uint64_t load64(const unsigned char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline std::uint64_t loadTail(const unsigned char* p, std::size_t n) {  // n < 8
    std::uint64_t v = 0;
    std::memcpy(&v, p, n);
    return v;
}
// The n < 8 bytes at p as one word, for hash64: overlapping loads instead of
// a byte-by-byte copy (most pieces are that short; the copy loop showed in
// the first-pass profile of issue 18). With n, the word determines the bytes.
inline std::uint64_t loadShort(const unsigned char* p, std::size_t n) {
    if (n >= 4) {
        std::uint32_t a;
        std::uint32_t b;
        std::memcpy(&a, p, 4);
        std::memcpy(&b, p + n - 4, 4);
        return a | (static_cast<std::uint64_t>(b) << 32);
    }
    if (n == 0) return 0;
    return p[0] | (static_cast<std::uint64_t>(p[n / 2]) << 8) | (static_cast<std::uint64_t>(p[n - 1]) << 16);
}
inline constexpr std::uint64_t kK0 = 0x9e3779b97f4a7c15ull;
inline constexpr std::uint64_t kK1 = 0xc2b2ae3d27d4eb4full;
inline constexpr std::uint64_t kK2 = 0x165667b19e3779f9ull;
inline constexpr std::uint64_t kK3 = 0xd6e8feb86659fd93ull;
}  // namespace hash_detail

inline std::uint64_t hash64(std::string_view bytes) {
    using namespace hash_detail;
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t n = bytes.size();
    std::uint64_t h = kK0 ^ (n * kK1);
    while (n >= 16) {
        h = fold(load64(p) ^ kK1, load64(p + 8) ^ h);
        p += 16;
        n -= 16;
    }
    if (n >= 8) {
        h = fold(load64(p) ^ kK2, h ^ kK3);
        p += 8;
        n -= 8;
    }
    return fold(loadShort(p, n) ^ kK3, h ^ kK0);
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
