#pragma once
// Bounded cache of BPE results per pre-tokenized piece (bytes -> ids). Most
// text is made of a few thousand distinct words, so after warm-up nearly every
// piece is a hash lookup. Not thread-safe: one per TokenCounter. Its memory is
// fixed at construction (slots and the two arenas, bytesFor(max_entries)):
// when the entries or either arena are full, it starts over.
//
// A slot holds the piece's bytes as two 8-byte words (all of a piece of up
// to 16 bytes, the first 16 of a longer one), so a lookup is one 32-byte slot
// and no call to memcmp: with the bytes in a second array, a first pass over
// new text would spend most of find() waiting for the slot, then the bytes.
// Callers prefetch the slot of a piece a few pieces ahead (prefetch()).
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "admission/tokenizer/fast_hash.hpp"

namespace dpgate::admission {

class WordCache {
public:
    // Rule lines in comments and man pages ("/* ===...=== */", 67-82 bytes)
    // repeat hundreds of times in a header-heavy text; with a bound of 64 each
    // would be a heap merge of ~70 symbols (10% of a cold count). Longer
    // distinct pieces fill the arena sooner; that costs a start-over, which is
    // still cheaper than the merges it saves on repeats.
    static constexpr std::size_t kMaxPieceBytes = 128;

    explicit WordCache(std::size_t max_entries = 1u << 16);

    // memoryBytes() of a cache of max_entries, once its arenas are allocated.
    static std::size_t bytesFor(std::size_t max_entries);

    // A piece's lookup key: its first 16 bytes (zero past its end) and a hash
    // of all of it.
    struct Key {
        std::uint64_t word0;
        std::uint64_t word1;
        std::uint64_t hash;
    };
    // `readable` bytes may be read at piece.data() (at least piece.size()).
    // With 16 or more, a piece of up to 16 bytes is keyed by two loads and a
    // mask, without a branch on its length: piece lengths follow each other
    // at random, and the branches of a bytewise key would mispredict on
    // about every piece of a warm count.
    static Key keyOf(std::string_view piece, std::size_t readable);

    void prefetch(const Key& key) const { __builtin_prefetch(&slots_[key.hash & mask_]); }
    // Ids cached for `piece` (with its key), or nullptr.
    const std::uint32_t* find(std::string_view piece, const Key& key, std::uint32_t& count) const;
    void insert(std::string_view piece, const Key& key, const std::uint32_t* ids, std::uint32_t count);
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
    static constexpr std::size_t kInlineBytes = 16;
    struct alignas(32) Slot {
        std::uint64_t key0 = 0;  // Key::word0 and word1: with bytes_len, the whole of a piece of <= 16 bytes
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

namespace word_cache_detail {
static_assert(std::endian::native == std::endian::little, "keys are masked as little-endian words");
// Masks keeping the first n bytes of a 16-byte key, for n = 0..16.
struct KeyMasks {
    std::uint64_t word[17][2];
    constexpr KeyMasks() : word() {
        for (std::size_t n = 0; n <= 16; ++n) {
            for (std::size_t b = 0; b < n; ++b) word[n][b / 8] |= std::uint64_t{0xff} << (8 * (b % 8));
        }
    }
};
inline constexpr KeyMasks kKeyMasks;
}  // namespace word_cache_detail

inline WordCache::Key WordCache::keyOf(std::string_view piece, std::size_t readable) {
    using namespace hash_detail;
    const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
    const std::size_t n = piece.size();
    std::uint64_t word0;
    std::uint64_t word1;
    if (readable >= kInlineBytes) {
        word0 = load64(p);
        word1 = load64(p + 8);
    } else {  // the last bytes of a text
        unsigned char bytes[kInlineBytes] = {};
        std::memcpy(bytes, p, n < kInlineBytes ? n : kInlineBytes);
        word0 = load64(bytes);
        word1 = load64(bytes + 8);
    }
    const std::uint64_t* mask = word_cache_detail::kKeyMasks.word[n < kInlineBytes ? n : kInlineBytes];
    word0 &= mask[0];
    word1 &= mask[1];
    std::uint64_t hash = fold(word0 ^ kK1, word1 ^ (n * kK2) ^ kK0);
    if (n > kInlineBytes) hash = foldRest(p + kInlineBytes, n - kInlineBytes, hash);
    return {word0, word1, hash};
}

}  // namespace dpgate::admission
