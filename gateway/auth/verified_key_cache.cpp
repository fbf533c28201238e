#include "gateway/auth/verified_key_cache.hpp"

#include <algorithm>
#include <cstring>

namespace dpgate::auth {

namespace {

constexpr std::size_t kWordBytes = sizeof(uint64_t);

// Zero when the first `words` words of a and b are equal; the work does not
// depend on where they differ (no early exit: every word is XORed in).
// OpenSSL's CRYPTO_memcmp does the same byte by byte; over every slot's full
// width that cost more than the SHA-256 the cache saves.
uint64_t differs(const unsigned char* a, const unsigned char* b, std::size_t words) {
    uint64_t acc = 0;
    for (std::size_t i = 0; i < words; ++i) {
        uint64_t x, y;
        std::memcpy(&x, a + i * kWordBytes, kWordBytes);
        std::memcpy(&y, b + i * kWordBytes, kWordBytes);
        acc |= x ^ y;
        // Keeps the compiler from turning the loop into one that stops at
        // the first difference.
        __asm__("" : "+r"(acc));
    }
    return acc;
}

}  // namespace

VerifiedKeyCache::VerifiedKeyCache(std::size_t capacity) : slots_(std::max<std::size_t>(capacity, 1)) {}

std::optional<std::size_t> VerifiedKeyCache::find(std::string_view key) const {
    if (key.empty() || key.size() > kMaxKeyBytes) return std::nullopt;
    std::array<unsigned char, kMaxKeyBytes> padded{};
    std::memcpy(padded.data(), key.data(), key.size());
    // Every slot is compared over the presented key's words (its length is
    // no secret: hashing it takes time by length too) and the first match
    // kept with masks, as KeyStore::authenticate does with the stored hashes.
    // Slots are zero-padded, so a longer cached key differs in these words
    // or in its length.
    const std::size_t words = (key.size() + kWordBytes - 1) / kWordBytes;
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    std::size_t found = none;
    for (const Slot& slot : slots_) {
        const std::size_t same_bytes = differs(padded.data(), slot.bytes.data(), words) == 0;
        const std::size_t same_length = slot.length == key.size();
        const std::size_t first = found == none;
        const std::size_t mask = std::size_t{0} - (same_bytes & same_length & first);
        found = (found & ~mask) | (slot.index & mask);
    }
    if (found == none) return std::nullopt;
    return found;
}

void VerifiedKeyCache::remember(std::string_view key, std::size_t index) {
    if (key.empty() || key.size() > kMaxKeyBytes || find(key)) return;
    Slot& slot = slots_[next_];
    slot.bytes.fill(0);
    std::memcpy(slot.bytes.data(), key.data(), key.size());
    slot.length = key.size();
    slot.index = index;
    next_ = (next_ + 1) % slots_.size();
    used_ = std::min(used_ + 1, slots_.size());
}

void VerifiedKeyCache::reset(uint64_t generation) {
    for (Slot& slot : slots_) {
        slot.bytes.fill(0);
        slot.length = 0;
        slot.index = 0;
    }
    used_ = 0;
    next_ = 0;
    generation_ = generation;
}

}  // namespace dpgate::auth
