// BpeModel's merge for pieces of more than 64 symbols: the rank sweep,
// linear in the piece with at most ~13 bytes of memory per symbol, where
// the heap merge (mergeHeap, its plain twin) takes O(n log n) time and
// ~36 bytes per symbol. A piece can be megabytes long (a run of one
// character, a word without spaces): the heap took 250 ns per byte of a
// run of 'a', the sweep 30 ns, and it is faster from 100 symbols up.
//
// Why it gives the heap's ids. The heap (HuggingFace's Word::merge_all)
// merges the lowest rank first, the leftmost first among equal ranks. When
// the merge list is monotone -- every merge ranks after every merge that
// produces one of its two parts, checked at load (computeRanksAreMonotone) -- a
// merge of rank r only creates pairs that rank above r: its new token's
// pairs are merges that take the token as a part. So the heap does all the
// merges of rank r one after the other, then rank r + 1, never coming back
// to a lower rank. Within rank r, merges at different places commute unless
// two candidate pairs share a symbol: pair (a, b) at both x and the symbol
// after x means b == a, a run of one symbol a, which the heap pairs up from
// the run's left end. The sweep therefore keeps, per rank, a bucket of the
// positions where a pair of that rank was pushed (stale entries are skipped
// when taken), empties the buckets in increasing rank, and pairs a run of a
// from its left end whichever of its positions it took first.
//
// Memory: the symbols (4 bytes each) and the bucket entries (4 bytes, in
// chunks of 15, plus a partly filled chunk per occupied rank). Entries stay
// below 2n: n - 1 at first, and a merge pushes at most one more than it
// takes (two new pairs for the one taken; a run's k merges k + 1 for one).
// Dead symbols stay in place (see kDead), so nothing is moved until the
// survivors are packed at the end.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

#include "admission/tokenizer/bpe_model.hpp"
#include "admission/tokenizer/bpe_pair_memo.hpp"

namespace dpgate::admission {

namespace {

// A dead position holds kDead | the other end of its run of dead positions,
// so the live neighbours of any position are found in O(1): reading the
// position after it gives the end of the gap that follows, reading the one
// before it the start of the gap that precedes.
constexpr std::uint32_t kDead = 0x80000000u;
constexpr std::uint32_t kNone = ~0u;

// Positions pushed per rank, last in first out, in 64-byte chunks from a
// pool of blocks (no reallocation, no per-entry allocation). One per
// thread, kept between sweeps: its per-rank arrays (5 bytes a rank, 640 KB
// for DeepSeek V3) need no clearing, as a finished sweep leaves every
// bucket empty, so a sweep of 65 symbols starts as cheaply as one of
// millions. The first block is small and kept too; the others are mapped
// (MappedAllocator) and dropped when the sweep ends.
class RankBuckets {
public:
    static constexpr std::size_t kPerChunk = 15;

    // Readies the buckets for a sweep over `ranks` ranks.
    void begin(std::size_t ranks) {
        if (ranks != ranks_ || in_sweep_) {  // another model, or a sweep that threw
            head_.reset(new std::uint32_t[ranks]);
            fill_.reset(new std::uint8_t[ranks]);
            occupied_.assign((ranks + 63) / 64, 0);
            summary_.assign((occupied_.size() + 63) / 64, 0);
            ranks_ = ranks;
            resetPool();
        }
        in_sweep_ = true;
    }
    // After the sweep has emptied every bucket.
    void end() {
        resetPool();
        in_sweep_ = false;
    }

    void push(std::uint32_t rank, std::uint32_t pos) {
        std::uint64_t& word = occupied_[rank >> 6];
        const std::uint64_t bit = std::uint64_t{1} << (rank & 63);
        if (!(word & bit)) {
            if (word == 0) summary_[rank >> 12] |= std::uint64_t{1} << ((rank >> 6) & 63);
            word |= bit;
            head_[rank] = newChunk(0);
            fill_[rank] = 0;
        } else if (fill_[rank] == kPerChunk) {
            head_[rank] = newChunk(head_[rank]);
            fill_[rank] = 0;
        }
        chunk(head_[rank]).pos[fill_[rank]++] = pos;
    }

    // Takes up to kPerChunk positions from the bucket of `rank` into `out`
    // (room for kPerChunk); returns how many (0: the bucket is empty).
    std::size_t pop(std::uint32_t rank, std::uint32_t* out) {
        if (!(occupied_[rank >> 6] & (std::uint64_t{1} << (rank & 63)))) return 0;
        std::uint32_t c = head_[rank];
        if (fill_[rank] == 0) {
            const std::uint32_t next = chunk(c).next;
            freeChunk(c);
            if (next == 0) {
                clear(rank);
                return 0;
            }
            head_[rank] = c = next;
            fill_[rank] = kPerChunk;
        }
        const Chunk& taken = chunk(c);
        // The bucket's next chunk is read next: a cache miss, as chunks of all
        // buckets come from one pool in the order they were needed.
        if (taken.next != 0) __builtin_prefetch(&chunk(taken.next));
        const std::size_t count = fill_[rank];
        std::copy_n(taken.pos, count, out);
        fill_[rank] = 0;
        return count;
    }

    // Starts loading the chunk pop(rank) will read first.
    void prefetch(std::uint32_t rank) {
        if (rank != kNone && fill_[rank] != 0) __builtin_prefetch(&chunk(head_[rank]));
    }

    // The lowest occupied rank at or above `from`, or kNone.
    std::uint32_t firstFrom(std::uint32_t from) const {
        const std::size_t w = from >> 6;
        if (w >= occupied_.size()) return kNone;
        if (const std::uint64_t bits = occupied_[w] & (~std::uint64_t{0} << (from & 63)); bits != 0)
            return static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
        const std::size_t after = w + 1;  // the first word not looked at yet
        std::size_t s = after >> 6;
        if (s >= summary_.size()) return kNone;
        std::uint64_t words = summary_[s] & (~std::uint64_t{0} << (after & 63));
        while (words == 0) {
            if (++s == summary_.size()) return kNone;
            words = summary_[s];
        }
        const std::size_t first = s * 64 + static_cast<std::size_t>(std::countr_zero(words));
        return static_cast<std::uint32_t>(first * 64 + static_cast<std::size_t>(std::countr_zero(occupied_[first])));
    }

private:
    struct Chunk {
        Chunk() noexcept {}  // a block's chunks are written before they are read: no zeroing
        std::uint32_t next;  // the chunk below in the same bucket; 0: none (chunk 0 is never used)
        std::uint32_t pos[kPerChunk];
    };
    static_assert(sizeof(Chunk) == 64);

    static constexpr std::uint32_t kFirstBlockChunks = 1024;  // 64 KB
    static constexpr std::uint32_t kBlockChunks = 16384;      // 1 MB
    using Block = std::vector<Chunk, MappedAllocator<Chunk>>;

    Chunk& chunk(std::uint32_t c) {
        if (c < kFirstBlockChunks) return blocks_[0][c];
        c -= kFirstBlockChunks;
        return blocks_[1 + c / kBlockChunks][c % kBlockChunks];
    }

    std::uint32_t newChunk(std::uint32_t next) {
        std::uint32_t c = free_;
        if (c != 0) {
            free_ = chunk(c).next;
        } else {
            if (allocated_ == capacity_) {
                const std::uint32_t size = blocks_.empty() ? kFirstBlockChunks : kBlockChunks;
                blocks_.emplace_back(size);
                capacity_ += size;
            }
            c = allocated_++;
            if (c == 0) c = allocated_++;  // 0 means "none"
        }
        chunk(c).next = next;
        return c;
    }
    void resetPool() {
        if (blocks_.size() > 1) blocks_.resize(1);
        capacity_ = blocks_.empty() ? 0 : kFirstBlockChunks;
        allocated_ = 0;
        free_ = 0;
    }
    void freeChunk(std::uint32_t c) {
        chunk(c).next = free_;
        free_ = c;
    }
    void clear(std::uint32_t rank) {
        std::uint64_t& word = occupied_[rank >> 6];
        word &= ~(std::uint64_t{1} << (rank & 63));
        if (word == 0) summary_[rank >> 12] &= ~(std::uint64_t{1} << ((rank >> 6) & 63));
    }

    std::size_t ranks_ = 0;
    bool in_sweep_ = false;
    std::unique_ptr<std::uint32_t[]> head_;  // valid where occupied
    std::unique_ptr<std::uint8_t[]> fill_;   // entries in the head chunk
    std::vector<std::uint64_t> occupied_;    // a bit per rank
    std::vector<std::uint64_t> summary_;     // a bit per word of occupied_
    std::vector<Block> blocks_;
    std::uint32_t allocated_ = 0;
    std::uint32_t capacity_ = 0;
    std::uint32_t free_ = 0;
};

thread_local RankBuckets rank_buckets;

}  // namespace

bool BpeModel::computeRanksAreMonotone() const {
    // The latest rank producing each token, over the merges in effect.
    std::vector<std::uint32_t> produced_at;
    for (const std::uint64_t slot : table_) {
        if (!(slot & kUsed)) continue;
        const auto rank = static_cast<std::uint32_t>(slot & kIdMask);
        const std::uint32_t merged = merged_by_rank_[rank];
        if (merged >= produced_at.size()) produced_at.resize(merged + 1, kNone);
        if (produced_at[merged] == kNone || produced_at[merged] < rank) produced_at[merged] = rank;
    }
    const auto after_its_parts = [&](std::uint32_t part, std::uint32_t rank) {
        return part >= produced_at.size() || produced_at[part] == kNone || produced_at[part] < rank;
    };
    for (const std::uint64_t slot : table_) {
        if (!(slot & kUsed)) continue;
        const auto rank = static_cast<std::uint32_t>(slot & kIdMask);
        const auto right = static_cast<std::uint32_t>((slot >> kIdBits) & kIdMask);
        const auto left = static_cast<std::uint32_t>((slot >> (2 * kIdBits)) & kIdMask);
        if (!after_its_parts(left, rank) || !after_its_parts(right, rank)) return false;
    }
    return true;
}

void BpeModel::mergeRankSweep(Symbols& symbols) const {
    const auto n = static_cast<std::uint32_t>(symbols.size());
    if (n < 2) return;
    std::uint32_t* const sym = symbols.data();
    RankBuckets& buckets = rank_buckets;
    buckets.begin(merged_by_rank_.size());

    // Live neighbours; n = none after, kNone = none before.
    const auto next = [&](std::uint32_t p) {
        std::uint32_t i = p + 1;
        if (i < n && (sym[i] & kDead)) i = (sym[i] & ~kDead) + 1;
        return i;
    };
    const auto prev = [&](std::uint32_t p) {
        if (p == 0) return kNone;
        const std::uint32_t i = p - 1;
        return (sym[i] & kDead) ? (sym[i] & ~kDead) - 1 : i;  // position 0 never dies: a gap starts at 1 or later
    };
    const auto push = [&](std::uint32_t p, std::uint32_t q) {
        const std::uint32_t rank = memoRank(sym[p], sym[q]);
        if (rank != kNoRank) buckets.push(rank, p);
    };
    // Merges the live pair (p, q) into merged_by_rank_[rank] at p; returns
    // the position after it (n: none).
    const auto mergeAt = [&](std::uint32_t p, std::uint32_t q, std::uint32_t rank) {
        const std::uint32_t after = next(q);
        sym[p] = merged_by_rank_[rank];
        sym[q] = kDead;                     // inside the dead run unless it ends it: its stale entries must see it dead
        const std::uint32_t first = p + 1;  // the dead run now reaches from p + 1 to after - 1
        const std::uint32_t last = after - 1;
        sym[first] = kDead | last;
        sym[last] = kDead | first;
        return after;
    };
    {
        // The initial pairs are independent: their lookups start kAhead early.
        constexpr std::uint32_t kAhead = 8;
        std::size_t hashes[kAhead];
        for (std::uint32_t i = 0; i + 1 < n && i < kAhead; ++i) hashes[i] = prefetchPair(sym[i], sym[i + 1]);
        for (std::uint32_t i = 0; i + 1 < n; ++i) {
            const std::uint32_t rank = memoRank(sym[i], sym[i + 1], hashes[i % kAhead]);
            if (i + kAhead + 1 < n) hashes[i % kAhead] = prefetchPair(sym[i + kAhead], sym[i + kAhead + 1]);
            if (rank != kNoRank) buckets.push(rank, i);
        }
    }

    // Merges the pair at p if it is still the pair of `rank` there.
    const auto take = [&](std::uint32_t p, std::uint32_t rank) {
        if (sym[p] & kDead) return;
        const std::uint32_t q = next(p);
        if (q >= n || memoRank(sym[p], sym[q]) != rank) return;
        if (sym[p] != sym[q]) {
            const std::uint32_t left = prev(p);
            const std::uint32_t after = mergeAt(p, q, rank);
            if (left != kNone) push(left, p);
            if (after < n) push(p, after);
            return;
        }
        // A run of one symbol a: every pair in it is (a, a), of this rank;
        // the heap pairs it up from its left end.
        const std::uint32_t a = sym[p];
        std::uint32_t start = p;
        for (std::uint32_t l = prev(start); l != kNone && sym[l] == a; l = prev(start)) start = l;
        const std::uint32_t left = prev(start);
        std::uint32_t last_merged = kNone;
        for (std::uint32_t cur = start;;) {
            const std::uint32_t t = next(cur);
            if (t >= n || sym[t] != a) break;
            const std::uint32_t after = mergeAt(cur, t, rank);
            if (last_merged != kNone) {
                push(last_merged, cur);
            } else if (left != kNone) {
                push(left, cur);
            }
            last_merged = cur;
            cur = after;
            if (cur >= n || sym[cur] != a) break;
        }
        if (const std::uint32_t right = next(last_merged); right < n) push(last_merged, right);
    };

    for (std::uint32_t rank = buckets.firstFrom(0); rank != kNone; rank = buckets.firstFrom(rank + 1)) {
        // A chunk of positions at a time, the next chunk's symbols prefetched
        // while this one's merge: in a random word each symbol is a cache
        // miss, and waiting for them one by one would be most of the sweep. Taking
        // positions early is safe: no merge of this rank pushes this rank, and
        // each position is checked when its turn comes.
        buckets.prefetch(buckets.firstFrom(rank + 1));
        std::uint32_t taken[2][RankBuckets::kPerChunk];
        std::size_t count[2];
        const auto popInto = [&](int b) {
            count[b] = buckets.pop(rank, taken[b]);
            for (std::size_t k = 0; k < count[b]; ++k) __builtin_prefetch(&sym[taken[b][k]]);
        };
        popInto(0);
        for (int b = 0; count[b] != 0; b ^= 1) {
            popInto(b ^ 1);
            for (std::size_t k = 0; k < count[b]; ++k) take(taken[b][k], rank);
        }
    }

    buckets.end();

    std::uint32_t out = 0;
    for (std::uint32_t p = 0; p < n; p = next(p)) sym[out++] = sym[p];
    symbols.resize(out);
}

}  // namespace dpgate::admission
