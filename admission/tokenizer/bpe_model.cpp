#include "admission/tokenizer/bpe_model.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "admission/tokenizer/bpe_pair_memo.hpp"

namespace dpgate::admission {

namespace {

std::atomic<std::uint64_t> next_model_id{1};

// This thread's merge buffers. Ordinary pieces are a few to a few hundred
// symbols; one of megabytes grows them, and releaseScratch() gives back
// whatever is above kRetainedSymbols.
template <typename T>
using ScratchVector = std::vector<T, MappedAllocator<T>>;
struct Scratch {
    ScratchVector<std::uint32_t> symbols;
    ScratchVector<std::int32_t> next;  // mergeHeap's list and heap
    ScratchVector<std::int32_t> prev;
    ScratchVector<std::uint64_t> heap;
};
thread_local Scratch scratch;
constexpr std::size_t kRetainedSymbols = 16384;

template <typename T>
void release(ScratchVector<T>& v, std::size_t keep) {
    if (v.capacity() > keep) ScratchVector<T>().swap(v);
}

}  // namespace

BpeModel::BpeModel(const std::uint32_t (&byte_ids)[256], const std::vector<Merge>& merges, bool char_premerge)
    : model_id_(next_model_id.fetch_add(1)) {
    std::copy(std::begin(byte_ids), std::end(byte_ids), byte_ids_);
    std::size_t capacity = 16;
    while (capacity < merges.size() * 2) capacity <<= 1;
    table_.assign(capacity, 0);
    mask_ = capacity - 1;
    merged_by_rank_.resize(merges.size());
    for (std::uint32_t rank = 0; rank < merges.size(); ++rank) {
        const Merge& m = merges[rank];
        merged_by_rank_[rank] = m.merged;
        const std::uint64_t key = pairKey(m.left, m.right);
        std::size_t i = mix(key) & mask_;
        while ((table_[i] & kUsed) && ((table_[i] >> kIdBits) & kPairMask) != key) i = (i + 1) & mask_;
        // A repeated pair takes its last rank: HuggingFace collects the merges
        // into a map, where a later line overwrites an earlier one.
        table_[i] = kUsed | (key << kIdBits) | rank;
    }
    pair_filter_.assign(std::size_t{1} << kFilterLineBits, FilterLine{});
    for (const std::uint64_t slot : table_) {
        if (!(slot & kUsed)) continue;
        const std::size_t hash = mix((slot >> kIdBits) & kPairMask);
        FilterLine& line = pair_filter_[filterLine(hash)];
        const unsigned a = filterBitA(hash);
        const unsigned b = filterBitB(hash);
        line.words[a >> 6] |= std::uint64_t{1} << (a & 63);
        line.words[b >> 6] |= std::uint64_t{1} << (b & 63);
    }
    if (char_premerge) buildCharPremerge();
    monotone_ = computeRanksAreMonotone();
}

std::span<const std::uint32_t> BpeModel::mergePiece(std::string_view piece, LongMerge strategy,
                                                    ShortMerge short_merge) const {
    Symbols& symbols = scratch.symbols;
    symbols.clear();
    // Sized once, exactly: growing by doubling would leave up to twice a long piece's bytes.
    if (symbols.capacity() < piece.size()) symbols.reserve(piece.size());
    initialSymbols(piece, symbols);
    mergeSymbols(symbols, strategy, short_merge);
    return symbols;
}

void BpeModel::encodePiece(std::string_view piece, std::vector<std::uint32_t>& ids, LongMerge strategy,
                           ShortMerge short_merge) const {
    const std::span<const std::uint32_t> merged = mergePiece(piece, strategy, short_merge);
    ids.insert(ids.end(), merged.begin(), merged.end());
}

void BpeModel::releaseScratch() {
    release(scratch.symbols, kRetainedSymbols);
    release(scratch.next, kRetainedSymbols);
    release(scratch.prev, kRetainedSymbols);
    release(scratch.heap, kRetainedSymbols);
}

std::size_t BpeModel::scratchBytes() {
    return scratch.symbols.capacity() * sizeof(std::uint32_t) + scratch.next.capacity() * sizeof(std::int32_t) +
           scratch.prev.capacity() * sizeof(std::int32_t) + scratch.heap.capacity() * sizeof(std::uint64_t);
}

void BpeModel::encodePieceFromBytes(std::string_view piece, std::vector<std::uint32_t>& ids) const {
    Symbols symbols;
    for (const char c : piece) symbols.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    mergeSymbols(symbols);
    ids.insert(ids.end(), symbols.begin(), symbols.end());
}

void BpeModel::initialSymbols(std::string_view piece, Symbols& symbols) const {
    const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
    const std::size_t n = piece.size();
    // Never more symbols than bytes: size once, write through a pointer.
    const std::size_t base = symbols.size();
    symbols.resize(base + n);
    std::uint32_t* out = symbols.data() + base;
    std::size_t i = 0;
    while (i < n) {
        const unsigned char b = p[i];
        // Lead bytes 0xe3..0xe9 start the premerge range. The shortcut is proven
        // only for whole characters between character boundaries, so it also
        // checks the neighbours (the text is validated UTF-8 anyway).
        if (b - 0xe3u <= 0xe9u - 0xe3u && i + 2 < n && (p[i + 1] & 0xc0) == 0x80 && (p[i + 2] & 0xc0) == 0x80 &&
            (i + 3 == n || (p[i + 3] & 0xc0) != 0x80) && (i == 0 || p[i - 1] < 0xc0)) {
            const std::uint32_t cp = ((b & 0x0fu) << 12) | ((p[i + 1] & 0x3fu) << 6) | (p[i + 2] & 0x3fu);
            const std::uint32_t index = cp - kCharPremergeFirst;  // wraps below the range
            if (index < char_premerge_.size()) {
                if (const std::uint64_t entry = char_premerge_[index]; entry != 0) {
                    *out++ = static_cast<std::uint32_t>(entry & kIdMask);
                    if (entry & kPremergeTwo) *out++ = static_cast<std::uint32_t>((entry >> kIdBits) & kIdMask);
                    i += 3;
                    continue;
                }
            }
        }
        *out++ = byte_ids_[b];
        ++i;
    }
    symbols.resize(static_cast<std::size_t>(out - symbols.data()));
}

void BpeModel::mergeSymbols(Symbols& symbols, LongMerge strategy, ShortMerge short_merge) const {
    if (bpe_detail::pair_memo.model_id != model_id_) {
        std::fill(std::begin(bpe_detail::pair_memo.slots), std::end(bpe_detail::pair_memo.slots), 0);
        bpe_detail::pair_memo.model_id = model_id_;
    }
    const std::size_t n = symbols.size();
    if (n < 2) return;  // nothing to merge
    // The sweep is faster than the heap from 100 symbols up (2x at 1,000,
    // 4x at 10,000 on a random word; tests/bench/tokenizer/README.md).
    const bool sweep = monotone_ && n < (std::size_t{1} << 31) &&
                       (strategy == LongMerge::kRankSweep || (strategy == LongMerge::kAuto && n > kLinearMergeMax));
    if (sweep) {
        mergeRankSweep(symbols);
    } else if (n <= kLinearMergeMax && short_merge == ShortMerge::kLinear) {
        mergeLinear(symbols);
    } else {
        mergeHeap(symbols);
    }
}

// Min-heap of candidate merges over a linked list of symbols, O(n log n), for
// long pieces: CJK clauses (one piece each) and very long words (a 100 KB
// word must not cost 10^10 steps).
void BpeModel::mergeHeap(Symbols& symbols) const {
    // Candidate = rank << 32 | position: a min-heap on it yields the lowest
    // rank, leftmost first. A candidate is stale when its left symbol died or
    // the pair now at its position has another rank (ranks are unique per pair).
    ScratchVector<std::int32_t>& next = scratch.next;
    ScratchVector<std::int32_t>& prev = scratch.prev;
    ScratchVector<std::uint64_t>& heap = scratch.heap;
    const auto n = static_cast<std::int32_t>(symbols.size());
    std::uint32_t* sym = symbols.data();
    next.resize(symbols.size());
    prev.resize(symbols.size());
    heap.clear();
    for (std::int32_t i = 0; i < n; ++i) {
        prev[i] = i - 1;
        next[i] = i + 1 < n ? i + 1 : -1;
    }
    auto push = [&](std::int32_t pos) {
        if (pos < 0 || next[pos] < 0) return;
        const std::uint32_t rank = memoRank(sym[pos], sym[next[pos]]);
        if (rank == kNoRank) return;
        heap.push_back((static_cast<std::uint64_t>(rank) << 32) | static_cast<std::uint32_t>(pos));
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
    };
    for (std::int32_t i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        const std::uint64_t top = heap.back();
        heap.pop_back();
        const auto rank = static_cast<std::uint32_t>(top >> 32);
        const auto pos = static_cast<std::int32_t>(top & 0xffffffffu);
        const std::int32_t right = next[pos];
        // Dead symbols have prev == -2.
        if (prev[pos] == -2 || right < 0 || memoRank(sym[pos], sym[right]) != rank) continue;
        sym[pos] = merged_by_rank_[rank];
        next[pos] = next[right];
        if (next[right] >= 0) prev[next[right]] = pos;
        prev[right] = -2;
        push(prev[pos]);
        push(pos);
    }
    std::size_t out = 0;
    for (std::int32_t i = 0; i >= 0; i = next[i]) sym[out++] = sym[i];
    symbols.resize(out);
}

}  // namespace dpgate::admission
