// BPE of a short piece by a linear scan, the fast path bpe_linear_merge
// (common/fast_paths.hpp); its plain twin is the heap of mergeHeap
// (bpe_model.cpp), which HuggingFace's Word::merge_all uses for every
// piece. Pieces average four bytes: an array of pair ranks and a scan for
// the lowest beats keeping a heap of them. bpe_linear_merge_test and the
// tokenizer fuzz target compare the two.
#include "admission/tokenizer/bpe_model.hpp"
#include "admission/tokenizer/bpe_pair_memo.hpp"

namespace dpgate::admission {

// Keeps the rank of every adjacent pair in an array: each merge is a linear
// scan for the lowest rank (leftmost on ties) plus two lookups for the new
// neighbours. Fastest for the short pieces most text is made of.
void BpeModel::mergeLinear(Symbols& symbols) const {
    std::size_t n = symbols.size();
    if (n < 2) return;
    std::uint32_t r[kLinearMergeMax];
    std::uint32_t* sym = symbols.data();
    std::size_t hashes[kLinearMergeMax];
    for (std::size_t i = 0; i + 1 < n; ++i) hashes[i] = prefetchPair(sym[i], sym[i + 1]);
    for (std::size_t i = 0; i + 1 < n; ++i) {
        r[i] = memoRank(sym[i], sym[i + 1], hashes[i]);
        // The merged id of the pair chosen next is read right after the scan:
        // start loading it now (merged_by_rank_ is 512 KB, read at random).
        if (r[i] != kNoRank) __builtin_prefetch(&merged_by_rank_[r[i]]);
    }
    while (n > 1) {
        std::size_t best = 0;
        std::uint32_t best_rank = r[0];
        for (std::size_t i = 1; i + 1 < n; ++i) {
            if (r[i] < best_rank) {
                best_rank = r[i];
                best = i;
            }
        }
        if (best_rank == kNoRank) break;
        sym[best] = merged_by_rank_[best_rank];
        // Remove symbol best+1 and the pair that started at it.
        for (std::size_t i = best + 1; i + 1 < n; ++i) {
            sym[i] = sym[i + 1];
            r[i] = r[i + 1];
        }
        --n;
        // The two new pairs are independent: both loads start before either is used.
        const bool has_right = best + 1 < n;
        const bool has_left = best > 0;
        const std::size_t right_hash = has_right ? prefetchPair(sym[best], sym[best + 1]) : 0;
        const std::size_t left_hash = has_left ? prefetchPair(sym[best - 1], sym[best]) : 0;
        if (has_right) {
            r[best] = memoRank(sym[best], sym[best + 1], right_hash);
            if (r[best] != kNoRank) __builtin_prefetch(&merged_by_rank_[r[best]]);
        }
        if (has_left) {
            r[best - 1] = memoRank(sym[best - 1], sym[best], left_hash);
            if (r[best - 1] != kNoRank) __builtin_prefetch(&merged_by_rank_[r[best - 1]]);
        }
    }
    symbols.resize(n);
}

}  // namespace dpgate::admission
