#pragma once
// The per-thread memo of merge-table answers and the rank lookups through
// it, shared by the BpeModel merges of bpe_model.cpp and
// bpe_rank_sweep.cpp (inline: they are their inner loops). Include only
// there.
#include <cstdint>

#include "admission/tokenizer/bpe_model.hpp"

namespace dpgate::admission {

namespace bpe_detail {

// Per-thread, direct-mapped memo of recent merge-table answers. Long pieces
// (CJK clauses are one piece each) repeat the same few thousand pairs, and a
// 256 KB memo answers most of them from L2 instead of the 2 MB table; every
// merge needs two such answers before the next can be chosen. No member
// initializers: zero-initialized, so the thread_local needs no guard.
struct PairMemo {
    static constexpr std::size_t kSlots = 32768;
    std::uint64_t model_id;
    std::uint64_t slots[kSlots];  // same layout as the table; rank all-ones = no merge
};
inline thread_local PairMemo pair_memo;

}  // namespace bpe_detail

inline std::size_t BpeModel::prefetchPair(std::uint32_t left, std::uint32_t right) const {
    const std::size_t hash = mix(pairKey(left, right));
    __builtin_prefetch(&pair_filter_[filterLine(hash)]);
    __builtin_prefetch(&bpe_detail::pair_memo.slots[hash & (bpe_detail::PairMemo::kSlots - 1)]);
    __builtin_prefetch(&table_[hash & mask_]);
    return hash;
}

inline std::uint32_t BpeModel::memoRank(std::uint32_t left, std::uint32_t right, std::size_t hash) const {
    const std::uint64_t key = pairKey(left, right);
    if (!mayMerge(hash)) return kNoRank;
    std::uint64_t& slot = bpe_detail::pair_memo.slots[hash & (bpe_detail::PairMemo::kSlots - 1)];
    if ((slot & kUsed) && ((slot >> kIdBits) & kPairMask) == key) {
        const auto rank = static_cast<std::uint32_t>(slot & kIdMask);
        return rank == kIdMask ? kNoRank : rank;
    }
    const std::uint32_t rank = rankOfKey(key, hash);
    slot = kUsed | (key << kIdBits) | (rank == kNoRank ? kIdMask : rank);
    return rank;
}

}  // namespace dpgate::admission
