// A count that every worker thread moves on every request (requests in
// flight, tokens per slot, answers per status) and that something else reads
// now and then (a scrape, the status page).
//
// One shared atomic would be one cache line all workers write: each add on a
// core that did not write it last waits for the line to come over, about
// 60 ns on these machines against a few for an add in the core's own cache
// (perf of the Release build). Here the count is kShards cells, one cache
// line each; a thread adds to the cell of its shard and a read adds the
// cells up. A read is not a snapshot of one instant: cells are read one
// after the other, so a value that went up and down meanwhile may be seen
// off by those moves, never by more.
//
// A worker thread owns its cell (ShardOwner): no other thread writes it, so
// its add is a load and a store. A locked add (fetch_add) waits for the
// core's pending stores to drain, even on a line the core already holds: on
// these machines 32 more of them per request cost 2.3 % of a small proxied
// request's CPU, and the metrics would make 19 per request. Every other
// thread (admission, control, tests) adds to one of the shared cells,
// which they take in turn, with fetch_add.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace dpgate::metrics {

inline constexpr size_t kShards = 16;
// Cells [0, kOwnedShards) are owned, one thread each; the rest are shared.
inline constexpr size_t kOwnedShards = 12;

namespace shard_detail {

struct ThreadShard {
    size_t index = kShards;  // kShards: none yet
    bool owned = false;
};
// Constant-initialized: reading it is one thread-pointer-relative load.
inline thread_local ThreadShard current;

// The calling thread's shard: the cell it owns, or else a shared one (taken
// in turn on first use, fixed from then on).
inline const ThreadShard& assigned() {
    ThreadShard& shard = current;
    if (shard.index == kShards) [[unlikely]] {
        static std::atomic<size_t> next{0};
        shard.index = kOwnedShards + next.fetch_add(1, std::memory_order_relaxed) % (kShards - kOwnedShards);
    }
    return shard;
}

// cell += n: a load and a store in an owned cell, fetch_add in a shared one.
// Integers wrap as unsigned ones do.
template <typename T>
inline void addTo(std::atomic<T>& cell, T n, bool owned) {
    if (!owned) {
        cell.fetch_add(n, std::memory_order_relaxed);
    } else if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        cell.store(T(U(cell.load(std::memory_order_relaxed)) + U(n)), std::memory_order_relaxed);
    } else {
        cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
}

// cell = min(cell + n, the largest T): for counts that only go up, which
// must not wrap to a small number (Prometheus reads a counter that went
// down as a restart). A shared cell takes a compare-and-swap loop where a
// wrapping add takes fetch_add: both are one locked instruction when
// uncontended.
template <typename T>
inline void addSaturatingTo(std::atomic<T>& cell, T n, bool owned) {
    static_assert(std::is_unsigned_v<T>);
    T old = cell.load(std::memory_order_relaxed);
    T sum;
    if (owned) {
        if (__builtin_add_overflow(old, n, &sum)) sum = std::numeric_limits<T>::max();
        cell.store(sum, std::memory_order_relaxed);
        return;
    }
    do {
        if (__builtin_add_overflow(old, n, &sum)) sum = std::numeric_limits<T>::max();
    } while (!cell.compare_exchange_weak(old, sum, std::memory_order_relaxed));
}

}  // namespace shard_detail

// The shard of the calling thread: fixed while it owns one or while it owns
// none.
inline size_t threadShard() { return shard_detail::assigned().index; }

// For the life of this object, its thread owns a cell of every sharded
// count, if one of the kOwnedShards is free; else the thread stays on a
// shared one. Made and destroyed on the same thread (a worker's, around its
// event loop). On destruction the cell is freed for the next owner, its
// counts kept: the handover is under a lock, so the next owner's first load
// sees this one's last store.
class ShardOwner {
public:
    ShardOwner();
    ~ShardOwner();
    ShardOwner(const ShardOwner&) = delete;
    ShardOwner& operator=(const ShardOwner&) = delete;

    bool owns() const { return index_ != kShards; }

private:
    size_t index_ = kShards;
};

// T is a signed or unsigned integer; unsigned counts wrap as one would with
// add(), and stop at the largest value with addSaturating() (read then with
// saturatedValue()). Use one or the other on a count, not both.
template <typename T>
class ShardedCount {
    using U = std::make_unsigned_t<T>;

public:
    void add(T n) {
        const shard_detail::ThreadShard& shard = shard_detail::assigned();
        shard_detail::addTo(cells_[shard.index].value, n, shard.owned);
    }
    void sub(T n) { add(T(U(0) - U(n))); }

    T value() const {
        U total = 0;
        for (const Cell& cell : cells_) total += U(cell.value.load(std::memory_order_relaxed));
        return T(total);
    }

    // Every cell only goes up and stops at the largest value, and so does
    // their sum: a read is never below an earlier one.
    void addSaturating(T n) requires std::is_unsigned_v<T> {
        const shard_detail::ThreadShard& shard = shard_detail::assigned();
        shard_detail::addSaturatingTo(cells_[shard.index].value, n, shard.owned);
    }
    T saturatedValue() const requires std::is_unsigned_v<T> {
        T total = 0;
        for (const Cell& cell : cells_)
            if (__builtin_add_overflow(total, cell.value.load(std::memory_order_relaxed), &total))
                return std::numeric_limits<T>::max();
        return total;
    }

private:
    struct alignas(64) Cell {
        std::atomic<T> value{0};
    };
    std::array<Cell, kShards> cells_;
};

}  // namespace dpgate::metrics
