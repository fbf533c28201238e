// Stable 64-bit hashing for routing. std::hash is neither stable across
// builds nor across processes; two gateway replicas must agree on every key
// and every slot score, so routing uses these fixed functions only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace dpgate::routing {

// MurmurHash3's 64-bit finaliser: a bijection with full avalanche, so any
// one-bit difference in the input flips about half the output bits.
constexpr uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

// The multiply-fold steps the byte hashes here and in the tokenizer's caches
// (admission/tokenizer/fast_hash.hpp) are built from.
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
// The n < 8 bytes at p as one word: overlapping loads instead of a
// byte-by-byte copy (most pieces are that short; a copy loop shows in the
// profile of a first pass over new text). With n, the word determines the bytes.
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
// The n bytes at p folded into h, 16 bytes per multiply, then the last
// under 16: the serial chain both the tokenizer's hash64 and addText end in.
inline std::uint64_t foldRest(const unsigned char* p, std::size_t n, std::uint64_t h) {
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
}  // namespace hash_detail

// Streaming hasher over byte fields. Every field is length-prefixed, so
// ("ab","c") and ("a","bc") hash differently.
class Hasher64 {
public:
    explicit Hasher64(uint64_t seed) : state_(mix64(seed ^ 0x9e3779b97f4a7c15ULL)) {}

    Hasher64& addU64(uint64_t v) {
        state_ = mix64(state_ ^ (v * 0x9e3779b97f4a7c15ULL)) + 0x632be59bd9b4e019ULL;
        return *this;
    }

    // One mix64 per 8 bytes: the explicit keys' and slot ids' hash, short
    // strings whose values are pinned across releases.
    Hasher64& addField(std::string_view bytes) {
        addU64(bytes.size());
        size_t i = 0;
        for (; i + 8 <= bytes.size(); i += 8) {
            uint64_t word;
            std::memcpy(&word, bytes.data() + i, 8);
            addU64(word);
        }
        uint64_t tail = 0;
        for (size_t shift = 0; i < bytes.size(); ++i, shift += 8)
            tail |= uint64_t(static_cast<unsigned char>(bytes[i])) << shift;
        return addU64(tail);
    }

    // A long field, folded 16 bytes per multiply in two independent lanes:
    // the conversation head key hashes an agent's whole system prompt and
    // tool list on every request (tens of KB), and addField's one serial
    // mix64 per 8 bytes would take 49 µs per 100 KB there; this takes
    // under 6. A crafted field can make two heads collide, which only puts
    // two conversations on one slot, and bounded load spreads a hot slot.
    Hasher64& addText(std::string_view bytes) {
        using namespace hash_detail;
        const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
        std::size_t n = bytes.size();
        std::uint64_t a = fold(state_ ^ kK0, n ^ kK1);
        if (n >= 64) {
            std::uint64_t b = a ^ kK2;
            do {
                a = fold(load64(p) ^ kK1, load64(p + 8) ^ a);
                b = fold(load64(p + 16) ^ kK3, load64(p + 24) ^ b);
                p += 32;
                n -= 32;
            } while (n >= 32);
            a = fold(a ^ kK2, b ^ kK0);
        }
        state_ = mix64(foldRest(p, n, a));
        return *this;
    }

    uint64_t digest() const { return mix64(state_); }

private:
    uint64_t state_;
};

inline uint64_t hashBytes(std::string_view bytes, uint64_t seed) { return Hasher64(seed).addField(bytes).digest(); }

}  // namespace dpgate::routing
