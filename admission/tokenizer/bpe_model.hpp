#pragma once
// Byte-level BPE over token ids: a piece's bytes map to the ids of their
// byte-level characters, then ranked merges apply lowest rank first,
// leftmost first among equal ranks (HuggingFace's BPE::merge_word order).
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "admission/tokenizer/mapped_allocator.hpp"
#include "common/fast_paths.hpp"

namespace dpgate::admission {

class BpeModel {
public:
    struct Merge {
        std::uint32_t left;
        std::uint32_t right;
        std::uint32_t merged;
    };

    // How a piece of more than kLinearMergeMax symbols is merged. Every
    // strategy gives the same ids.
    enum class LongMerge : std::uint8_t {
        // The rank sweep when the ranks are monotone, else the heap.
        kAuto,
        // The plain path: a heap of candidate merges, as HuggingFace's
        // Word::merge_all; O(n log n) and ~20 bytes a symbol.
        kHeap,
        // The rank sweep for every piece of 2 symbols or more when the ranks
        // are monotone (tests compare it with the heap on short pieces too).
        kRankSweep,
    };

    // Pieces up to this many symbols merge by a linear scan
    // (bpe_linear_merge.cpp), cheaper than keeping a heap for them.
    static constexpr std::size_t kLinearMergeMax = 64;
    // How a piece of at most kLinearMergeMax symbols is merged (unless the
    // LongMerge is kRankSweep). Either gives the same ids.
    enum class ShortMerge : std::uint8_t {
        // A scan of an array of pair ranks (bpe_linear_merge.cpp): the fast
        // path bpe_linear_merge, fastest for the short pieces most text is.
        kLinear,
        // The plain path: the heap, as for long pieces.
        kHeap,
    };

    // byte_ids[b] is the id of byte b's byte-level character; merges are in
    // rank order (index = rank). `char_premerge` false: every piece starts
    // from its bytes, the plain twin of the per-character shortcut
    // (bpe_char_premerge.cpp); the same ids either way.
    BpeModel(const std::uint32_t (&byte_ids)[256], const std::vector<Merge>& merges,
             bool char_premerge = fastPathOn(FastPath::bpe_char_premerge));

    // The ids of one pre-tokenized piece, in this thread's buffer: valid
    // until the next call on this thread or releaseScratch().
    std::span<const std::uint32_t> mergePiece(std::string_view piece, LongMerge strategy = LongMerge::kAuto,
                                              ShortMerge short_merge = ShortMerge::kLinear) const;
    // Appends the ids of one pre-tokenized piece.
    void encodePiece(std::string_view piece, std::vector<std::uint32_t>& ids, LongMerge strategy = LongMerge::kAuto,
                     ShortMerge short_merge = ShortMerge::kLinear) const;

    // Same ids as encodePiece, always merging from single bytes (no per-character
    // shortcut); for tests that check the shortcut changes nothing.
    void encodePieceFromBytes(std::string_view piece, std::vector<std::uint32_t>& ids) const;

    std::size_t memoryBytes() const {
        return table_.size() * sizeof(std::uint64_t) + merged_by_rank_.size() * 4 +
               char_premerge_.size() * sizeof(std::uint64_t) + pair_filter_.size() * sizeof(FilterLine);
    }
    // Whether every merge ranks after each merge producing one of its parts,
    // which the rank sweep needs (bpe_rank_sweep.cpp). Checked at load.
    bool ranksAreMonotone() const { return monotone_; }

    // Frees this thread's buffers that a long piece grew beyond what
    // ordinary pieces need: a worker lives for ever, one huge request must
    // not keep its memory. mergePiece's last answer becomes invalid.
    static void releaseScratch();
    // Bytes this thread's buffers hold now (tests check the release).
    static std::size_t scratchBytes();

    // Characters of kCharPremergeFirst..kCharPremergeLast that start from
    // their merged tokens instead of their bytes (see bpe_char_premerge.cpp).
    std::size_t premergedCharCount() const;

    // Ids and ranks must be below 2^kIdBits (load checks).
    static constexpr unsigned kIdBits = 21;

private:
    // One 8-byte slot per merge so the table (2 MB for DeepSeek's 128K merges)
    // is as cache-friendly as it can be: [used:1][left:21][right:21][rank:21].
    // The merged id is looked up by rank, only when a merge happens.
    static constexpr std::uint64_t kIdMask = (1ull << kIdBits) - 1;
    static constexpr std::uint64_t kPairMask = (1ull << (2 * kIdBits)) - 1;
    static constexpr std::uint64_t kUsed = 1ull << 63;
    static constexpr std::uint32_t kNoRank = ~0u;

    static std::uint64_t pairKey(std::uint32_t left, std::uint32_t right) {
        return (static_cast<std::uint64_t>(left) << kIdBits) | right;
    }
    static std::size_t mix(std::uint64_t key) {
        key ^= key >> 29;
        key *= 0x7fb5d329728ea185ull;
        key ^= key >> 32;
        return static_cast<std::size_t>(key);
    }
    // Rank of the merge (left, right), or kNoRank.
    std::uint32_t rankOf(std::uint32_t left, std::uint32_t right) const {
        const std::uint64_t key = pairKey(left, right);
        return rankOfKey(key, mix(key));
    }
    std::uint32_t rankOfKey(std::uint64_t key, std::size_t hash) const {
        std::size_t i = hash & mask_;
        for (;;) {
            const std::uint64_t slot = table_[i];
            if (!(slot & kUsed)) return kNoRank;
            if (((slot >> kIdBits) & kPairMask) == key) return static_cast<std::uint32_t>(slot & kIdMask);
            i = (i + 1) & mask_;
        }
    }
    // Same answers as rankOf, through a per-thread memo (see bpe_model.cpp).
    std::uint32_t memoRank(std::uint32_t left, std::uint32_t right) const {
        return memoRank(left, right, mix(pairKey(left, right)));
    }
    // With `hash` = mix(pairKey(left, right)), computed early by prefetchPair().
    std::uint32_t memoRank(std::uint32_t left, std::uint32_t right, std::size_t hash) const;
    // Starts loading what memoRank will read for a pair (filter, memo, table)
    // and returns its hash: on text seen for the first time these are cache
    // misses, and a piece's initial pairs are independent of each other.
    std::size_t prefetchPair(std::uint32_t left, std::uint32_t right) const;

    // A piece's symbols while it merges: as many as its bytes at first.
    using Symbols = std::vector<std::uint32_t, MappedAllocator<std::uint32_t>>;

    // Fills char_premerge_ (bpe_char_premerge.cpp).
    void buildCharPremerge();
    // The symbols a piece starts from: one per byte, except that a 3-byte
    // character with a char_premerge_ entry contributes its merged tokens.
    void initialSymbols(std::string_view piece, Symbols& symbols) const;
    void mergeSymbols(Symbols& symbols, LongMerge strategy = LongMerge::kAuto,
                      ShortMerge short_merge = ShortMerge::kLinear) const;

    void mergeLinear(Symbols& symbols) const;
    void mergeHeap(Symbols& symbols) const;
    // Linear merge for monotone ranks (bpe_rank_sweep.cpp); positions must
    // fit in 31 bits.
    void mergeRankSweep(Symbols& symbols) const;
    bool computeRanksAreMonotone() const;

    std::uint64_t model_id_;  // keys the per-thread pair memo
    bool monotone_ = false;
    std::uint32_t byte_ids_[256];
    std::vector<std::uint64_t> table_;
    // Bloom filter over the merge pairs (two bits per pair from mix(key)):
    // most adjacent pairs of CJK text are not merges, and the 256 KB filter
    // says so without touching the 2 MB table or the pair memo. Blocked: both
    // bits of a pair lie in one 64-byte line, so a cold lookup is one cache
    // miss, not two (the first pass over new text would wait on both).
    struct alignas(64) FilterLine {
        std::uint64_t words[8];
    };
    static constexpr unsigned kFilterLineBits = 12;  // 4096 lines = 256 KB
    std::vector<FilterLine> pair_filter_;
    static std::size_t filterLine(std::size_t hash) { return (hash >> 18) & ((std::size_t{1} << kFilterLineBits) - 1); }
    static unsigned filterBitA(std::size_t hash) { return static_cast<unsigned>(hash >> 30) & 511; }
    static unsigned filterBitB(std::size_t hash) { return static_cast<unsigned>(hash >> 39) & 511; }
    bool mayMerge(std::size_t hash) const {
        const FilterLine& line = pair_filter_[filterLine(hash)];
        const unsigned a = filterBitA(hash);
        const unsigned b = filterBitB(hash);
        return ((line.words[a >> 6] >> (a & 63)) & (line.words[b >> 6] >> (b & 63)) & 1) != 0;
    }
    std::vector<std::uint32_t> merged_by_rank_;
    std::size_t mask_ = 0;

public:
    // The pre-tokenizer's CJK class (kana, U+4E00..U+9FA5) lies in this range,
    // all of it 3-byte UTF-8: the pieces that are long and never repeat.
    static constexpr std::uint32_t kCharPremergeFirst = 0x3040;
    static constexpr std::uint32_t kCharPremergeLast = 0x9fa5;

private:
    // Indexed by code point - kCharPremergeFirst: 0 = start from the bytes;
    // else kUsed | (two tokens ? kPremergeTwo : 0) | second << kIdBits | first.
    static constexpr std::uint64_t kPremergeTwo = 1ull << 62;
    std::vector<std::uint64_t> char_premerge_;
};

}  // namespace dpgate::admission
