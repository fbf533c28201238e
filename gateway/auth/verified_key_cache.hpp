// Keys that already hashed to a stored SHA-256, remembered so that their next
// request skips the hash. KeyStore keeps one per thread; pure otherwise.
//
// Why: hashing the presented key would be the one cryptographic step on
// every request (docs/BENCHMARKS.md). A cached key is held as its exact
// bytes, so a hit means the presented key *is* one that passed the hash
// check: a wrong key can only miss and then fails the hash check as before.
//
// Lookups compare the presented key with every slot, word by word without
// stopping at a difference or a match: neither which slot holds a key nor
// how much of it matched shows in the timing (only the presented key's
// length does, as it does in hashing it). Keys longer than that
// width are never cached (they take the hash path every time).
//
// Bounded: `capacity` slots of kMaxKeyBytes each, the oldest replaced first.
// The cache belongs to one KeyStore generation; a reloaded store starts
// empty (KeyStore checks the generation before every use).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dpgate::auth {

class VerifiedKeyCache {
public:
    static constexpr std::size_t kMaxKeyBytes = 128;
    static constexpr std::size_t kDefaultCapacity = 8;

    explicit VerifiedKeyCache(std::size_t capacity = kDefaultCapacity);

    // The entry index remembered for exactly this key, or nullopt.
    std::optional<std::size_t> find(std::string_view key) const;

    // Remembers that `key` verified as entry `index` (replacing the oldest
    // slot when full). Keys longer than kMaxKeyBytes are not remembered.
    void remember(std::string_view key, std::size_t index);

    // Forgets every key; `generation` names the KeyStore the cache now serves.
    void reset(uint64_t generation);
    uint64_t generation() const { return generation_; }

    std::size_t size() const { return used_; }
    std::size_t capacity() const { return slots_.size(); }

private:
    static_assert(kMaxKeyBytes % sizeof(uint64_t) == 0, "slots are compared a word at a time");
    struct Slot {
        std::array<unsigned char, kMaxKeyBytes> bytes{};  // the key, zero-padded
        std::size_t length = 0;                           // 0: empty slot (a key is never empty)
        std::size_t index = 0;
    };

    std::vector<Slot> slots_;
    std::size_t used_ = 0;
    std::size_t next_ = 0;  // the slot replaced next once all are used
    uint64_t generation_ = 0;
};

}  // namespace dpgate::auth
