#pragma once
// Bounded cache of token counts per text segment (the text between two added
// tokens), keyed by a 128-bit hash and the length. The rendered prompt of the
// next turn of a conversation repeats every earlier segment byte for byte, so
// only the new segments are tokenized.
//
// Bounded in bytes (model.count_cache_bytes): two open-addressing tables of
// 32-byte entries, the current generation and the previous one, approximate
// LRU. A hit in the previous generation is copied into the current one; when
// the current one is full and may not grow, the previous one is dropped and
// the current one becomes previous. The tables' slots are the whole memory
// (no per-entry allocation), so memoryBytes() is exact and never exceeds
// maxBytes(), not even while a table is rehashed. An evicted segment is
// simply counted again: eviction never changes a count.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "admission/tokenizer/fast_hash.hpp"

namespace dpgate::admission {

class SegmentCache {
public:
    static constexpr std::size_t kEntryBytes = 32;

    // max_entries: 0 = as many as max_bytes allows; else at most that many
    // entries in all (tests use small values to force eviction).
    explicit SegmentCache(std::size_t max_bytes = std::size_t{256} << 20, std::size_t max_entries = 0);

    std::optional<std::uint64_t> find(std::string_view segment, Hash128 hash);
    void insert(std::string_view segment, Hash128 hash, std::uint64_t tokens);

    // Entries in both generations (a promoted entry may be in both).
    std::size_t size() const { return current_.used + previous_.used; }
    std::uint64_t hits() const { return hits_; }
    std::uint64_t misses() const { return misses_; }
    // Generations dropped so far (each drop evicts what was not promoted).
    std::uint64_t rotations() const { return rotations_; }
    std::size_t memoryBytes() const { return (current_.slots.size() + previous_.slots.size()) * kEntryBytes; }
    std::size_t maxBytes() const { return max_bytes_; }

private:
    struct Entry {
        std::uint64_t lo = 0;
        std::uint64_t hi = 0;
        std::uint64_t bytes = 0;  // 0: empty slot (cached segments are never empty)
        std::uint64_t tokens = 0;
    };
    static_assert(sizeof(Entry) == kEntryBytes);
    struct Table {
        std::vector<Entry> slots;
        std::size_t used = 0;
        const Entry* find(Hash128 hash, std::uint64_t bytes) const;
        void put(Hash128 hash, std::uint64_t bytes, std::uint64_t tokens);  // room and absence are the caller's
    };

    // Entries a table of `slots` slots may hold before it counts as full.
    std::size_t loadLimit(std::size_t slots) const;
    // Makes room for one more entry in current_ (grow, or rotate the generations).
    void makeRoom();

    Table current_;
    Table previous_;
    std::size_t max_bytes_;
    std::size_t max_slots_;  // per table: two full tables fit in max_bytes_
    std::size_t max_entries_per_table_;
    std::uint64_t hits_ = 0;
    std::uint64_t misses_ = 0;
    std::uint64_t rotations_ = 0;
};

}  // namespace dpgate::admission
