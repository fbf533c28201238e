// Stable 64-bit hashing for routing. std::hash is neither stable across
// builds nor across processes; two gateway replicas must agree on every key
// and every slot score, so routing uses these fixed functions only.
#pragma once

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

// Streaming hasher over byte fields. Every field is length-prefixed, so
// ("ab","c") and ("a","bc") hash differently.
class Hasher64 {
public:
    explicit Hasher64(uint64_t seed) : state_(mix64(seed ^ 0x9e3779b97f4a7c15ULL)) {}

    Hasher64& addU64(uint64_t v) {
        state_ = mix64(state_ ^ (v * 0x9e3779b97f4a7c15ULL)) + 0x632be59bd9b4e019ULL;
        return *this;
    }

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

    uint64_t digest() const { return mix64(state_); }

private:
    uint64_t state_;
};

inline uint64_t hashBytes(std::string_view bytes, uint64_t seed) { return Hasher64(seed).addField(bytes).digest(); }

}  // namespace dpgate::routing
