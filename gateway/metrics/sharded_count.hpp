// A count that every worker thread moves on every request (requests in
// flight, tokens per slot, answers per status) and that something else reads
// now and then (a scrape, the status page).
//
// One shared atomic would be one cache line all workers write: each add on a
// core that did not write it last waits for the line to come over, about
// 60 ns on these machines against a few for an add in the core's own cache
// (perf of the Release build, docs/BENCHMARKS.md, twelfth round). Here the
// count is kShards cells, one cache line each; a thread adds to the cell of
// its shard (threads take shards in turn, so a gateway's few workers each
// own one) and a read adds the cells up. A read is not a snapshot of one
// instant: cells are read one after the other, so a value that went up and
// down meanwhile may be seen off by those moves, never by more.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dpgate::metrics {

inline constexpr size_t kShards = 8;

// The shard of the calling thread, fixed for its lifetime.
inline size_t threadShard() {
    static std::atomic<size_t> next{0};
    thread_local const size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kShards;
    return shard;
}

// T is a signed or unsigned integer; unsigned counts wrap as one would.
template <typename T>
class ShardedCount {
public:
    void add(T n) { cells_[threadShard()].value.fetch_add(n, std::memory_order_relaxed); }
    void sub(T n) { cells_[threadShard()].value.fetch_sub(n, std::memory_order_relaxed); }

    T value() const {
        T total = 0;
        for (const Cell& cell : cells_) total += cell.value.load(std::memory_order_relaxed);
        return total;
    }

private:
    struct alignas(64) Cell {
        std::atomic<T> value{0};
    };
    std::array<Cell, kShards> cells_;
};

}  // namespace dpgate::metrics
