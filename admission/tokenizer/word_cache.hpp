#pragma once
// Bounded cache of BPE results per pre-tokenized piece (bytes -> ids). Most
// text is made of a few thousand distinct words, so after warm-up nearly every
// piece is a hash lookup. Not thread-safe: one per TokenCounter. Its memory is
// fixed at construction (slots and the two arenas, bytesFor(max_entries)):
// when the entries or either arena are full, it starts over.
//
// A slot holds the piece's bytes as two 8-byte words (all of a piece of up
// to 16 bytes, the first 16 of a longer one), so a lookup is one 32-byte slot
// and no call to memcmp: the first pass over new text (issue 18) spent most
// of find() waiting for the slot and then for the bytes in a second array.
// Callers prefetch the slot of a piece a few pieces ahead (prefetch()).
#include <cstdint>
#include <string_view>
#include <vector>

namespace dpgate::admission {

class WordCache {
public:
    // Rule lines in comments and man pages ("/* ===...=== */", 67-82 bytes)
    // repeat hundreds of times in a header-heavy text, and each was a heap
    // merge of ~70 symbols at 64 (issue 18: 10% of a cold count). Longer
    // distinct pieces fill the arena sooner; that costs a start-over, which is
    // still cheaper than the merges it saves on repeats.
    static constexpr std::size_t kMaxPieceBytes = 128;

    explicit WordCache(std::size_t max_entries = 1u << 16);

    // memoryBytes() of a cache of max_entries, once its arenas are allocated.
    static std::size_t bytesFor(std::size_t max_entries);

    void prefetch(std::uint64_t hash) const { __builtin_prefetch(&slots_[hash & mask_]); }
    // Ids cached for `piece` (with its hash), or nullptr.
    const std::uint32_t* find(std::string_view piece, std::uint64_t hash, std::uint32_t& count) const;
    void insert(std::string_view piece, std::uint64_t hash, const std::uint32_t* ids, std::uint32_t count);
    void clear();

    std::size_t size() const { return size_; }
    std::size_t memoryBytes() const {
        return slots_.capacity() * sizeof(Slot) + bytes_.capacity() + ids_.capacity() * sizeof(std::uint32_t);
    }
    // Arena room per entry: pieces average ~6 bytes and ~1.3 ids in prose and
    // code, and only bytes after the 16th go to the arena (a tenth of the
    // distinct pieces of the system corpus are longer); a cache of long
    // pieces starts over sooner instead of growing.
    static constexpr std::size_t kArenaBytesPerEntry = 4;
    static constexpr std::size_t kArenaIdsPerEntry = 4;

private:
    struct alignas(32) Slot {
        std::uint64_t key0 = 0;  // keyWords(): with bytes_len, the whole of a piece of <= 16 bytes
        std::uint64_t key1 = 0;
        std::uint32_t bytes_offset = 0;  // bytes after the 16th, in bytes_
        std::uint32_t ids_offset = 0;
        std::uint16_t bytes_len = 0;  // 0: empty slot (pieces are never empty)
        std::uint16_t ids_len = 0;
    };
    static_assert(sizeof(Slot) == 32);

    std::vector<Slot> slots_;
    std::vector<char> bytes_;
    std::vector<std::uint32_t> ids_;
    std::size_t mask_;
    std::size_t max_entries_;
    std::size_t max_arena_bytes_;
    std::size_t max_arena_ids_;
    std::size_t size_ = 0;
};

}  // namespace dpgate::admission
