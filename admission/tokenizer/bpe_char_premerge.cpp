// BpeModel's per-character shortcut: a CJK clause (one piece of ~60 bytes
// that never repeats) may start BPE from the tokens each of its characters
// merges into on its own, instead of from its bytes, when that provably gives
// the same ids. That removes the two intra-character merges per character
// (two thirds of the merges of Chinese text) from every clause.
//
// Why it is exact. Take a character C whose 3 bytes, merged alone, reach
// tokens F(C) through internal merges of ranks <= R(C). In a piece, BPE
// merges the lowest rank first; C's pending internal pairs are always there
// until done, so no merge of rank > R(C) can happen while C is unfinished.
// If every merge that could join one of C's edge symbols (any symbol that is
// ever C's leftmost or rightmost, F(C)'s included) with an outside neighbour
// ranks above R(C), then:
//   - while C is unfinished its symbols only take part in its own merges,
//     which run in the same relative order as alone, so C ends as F(C);
//   - every other merge sees the same neighbours and ranks as it would if C
//     had been F(C) from the start, since a pair that exists only in the
//     shortcut state (a neighbour next to F(C)) ranks above R(C), above the
//     merge being chosen.
// So the piece ends with the same symbols either way. Characters that fail
// the check (or do not merge at all) start from their bytes as before; the
// argument holds per character, so mixing both kinds in a piece is fine.
//
// The neighbour of a character's left edge ends at a character boundary, so
// its last byte is not a UTF-8 lead byte; the neighbour of its right edge
// starts at one, so its first byte is not a continuation byte. Merges with
// impossible neighbours are ignored, which keeps rarer characters (whose
// internal merges rank late) eligible. initialSymbols() applies the shortcut
// only where those boundaries really are (always, for validated UTF-8).
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "admission/tokenizer/bpe_model.hpp"

namespace dpgate::admission {

void BpeModel::buildCharPremerge() {
    constexpr std::uint32_t kNone = ~0u;
    const auto ranks = static_cast<std::uint32_t>(merged_by_rank_.size());
    // The merges in effect (a repeated pair keeps only its last rank), by rank.
    std::vector<std::uint32_t> left_of(ranks, kNone);
    std::vector<std::uint32_t> right_of(ranks, kNone);
    std::uint32_t id_end = 0;
    for (const std::uint32_t id : byte_ids_) id_end = std::max(id_end, id + 1);
    for (const std::uint64_t slot : table_) {
        if (!(slot & kUsed)) continue;
        const auto rank = static_cast<std::uint32_t>(slot & kIdMask);
        const auto right = static_cast<std::uint32_t>((slot >> kIdBits) & kIdMask);
        const auto left = static_cast<std::uint32_t>((slot >> (2 * kIdBits)) & kIdMask);
        left_of[rank] = left;
        right_of[rank] = right;
        id_end = std::max({id_end, left + 1, right + 1, merged_by_rank_[rank] + 1});
    }

    // Which tokens may end with a non-lead byte (may sit left of a character)
    // and may start with a non-continuation byte (may sit right of one). A
    // token's first byte is its left part's, its last byte its right part's;
    // OR-propagated to a fixed point, since a file need not list a merge after
    // the merges of its parts. Tokens no merge reaches stay false: they never
    // appear inside a piece.
    std::vector<std::uint8_t> ends_non_lead(id_end, 0);
    std::vector<std::uint8_t> starts_non_cont(id_end, 0);
    for (unsigned b = 0; b < 256; ++b) {
        if (b < 0xc0) ends_non_lead[byte_ids_[b]] = 1;
        if (b < 0x80 || b >= 0xc0) starts_non_cont[byte_ids_[b]] = 1;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (std::uint32_t rank = 0; rank < ranks; ++rank) {
            if (left_of[rank] == kNone) continue;
            const std::uint32_t merged = merged_by_rank_[rank];
            if (ends_non_lead[right_of[rank]] && !ends_non_lead[merged]) ends_non_lead[merged] = changed = true;
            if (starts_non_cont[left_of[rank]] && !starts_non_cont[merged]) starts_non_cont[merged] = changed = true;
        }
    }

    // Lowest rank of a merge that takes the token as its right part with a
    // possible left neighbour, and as its left part with a possible right one.
    std::vector<std::uint32_t> first_as_right(id_end, kNone);
    std::vector<std::uint32_t> first_as_left(id_end, kNone);
    for (std::uint32_t rank = 0; rank < ranks; ++rank) {
        const std::uint32_t left = left_of[rank];
        const std::uint32_t right = right_of[rank];
        if (left == kNone) continue;
        if (ends_non_lead[left]) first_as_right[right] = std::min(first_as_right[right], rank);
        if (starts_non_cont[right]) first_as_left[left] = std::min(first_as_left[left], rank);
    }

    char_premerge_.assign(kCharPremergeLast - kCharPremergeFirst + 1, 0);
    for (std::uint32_t cp = kCharPremergeFirst; cp <= kCharPremergeLast; ++cp) {
        const unsigned char bytes[3] = {static_cast<unsigned char>(0xe0 | (cp >> 12)),
                                        static_cast<unsigned char>(0x80 | ((cp >> 6) & 0x3f)),
                                        static_cast<unsigned char>(0x80 | (cp & 0x3f))};
        std::array<std::uint32_t, 3> sym = {byte_ids_[bytes[0]], byte_ids_[bytes[1]], byte_ids_[bytes[2]]};
        std::size_t n = 3;
        // Three symbols merge at most twice: three edges each, on the stack
        // (two small vectors per code point would be a third of this function).
        std::array<std::uint32_t, 3> left_edges = {sym[0]};
        std::array<std::uint32_t, 3> right_edges = {sym[2]};
        std::size_t edges = 1;
        std::uint32_t max_rank = 0;
        bool merged_any = false;
        // The same order as mergeLinear: lowest rank, leftmost among equals.
        for (;;) {
            std::size_t best = 0;
            std::uint32_t best_rank = kNoRank;
            for (std::size_t i = 0; i + 1 < n; ++i) {
                const std::uint32_t r = rankOf(sym[i], sym[i + 1]);
                if (r < best_rank) {
                    best_rank = r;
                    best = i;
                }
            }
            if (best_rank == kNoRank) break;
            sym[best] = merged_by_rank_[best_rank];
            for (std::size_t i = best + 1; i + 1 < n; ++i) sym[i] = sym[i + 1];
            --n;
            merged_any = true;
            max_rank = std::max(max_rank, best_rank);
            left_edges[edges] = sym[0];
            right_edges[edges] = sym[n - 1];
            ++edges;
        }
        if (!merged_any) continue;  // starting from the bytes is the same thing
        bool safe = true;
        for (std::size_t e = 0; e < edges; ++e) {
            const std::uint32_t left = left_edges[e];
            const std::uint32_t right = right_edges[e];
            safe = safe && (left >= id_end || first_as_right[left] == kNone || first_as_right[left] > max_rank);
            safe = safe && (right >= id_end || first_as_left[right] == kNone || first_as_left[right] > max_rank);
        }
        if (!safe) continue;
        std::uint64_t entry = kUsed | sym[0];
        if (n == 2) entry |= kPremergeTwo | (static_cast<std::uint64_t>(sym[1]) << kIdBits);
        char_premerge_[cp - kCharPremergeFirst] = entry;
    }
}

std::size_t BpeModel::premergedCharCount() const {
    return static_cast<std::size_t>(
        std::count_if(char_premerge_.begin(), char_premerge_.end(), [](std::uint64_t entry) { return entry != 0; }));
}

}  // namespace dpgate::admission
