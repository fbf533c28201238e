// A value every request reads and a reload (or a health change) replaces now
// and then: the key store, the key limiter, the routing table.
//
// Why not std::atomic_load of a shared_ptr: libstdc++ implements it with a
// mutex from a small global pool, and every copy bumps the one reference
// count all worker threads share, so two workers bounce its cache line on
// every request (docs/BENCHMARKS.md).
//
// Here each thread keeps its own hold on the value it last saw, and a load
// answers from it while nothing new was stored: one atomic load of the
// generation, no lock. local() returns a LocalRef counted in that hold, a
// plain integer of the thread's (no locked instruction); load() returns a
// std::shared_ptr, for a reader that passes the value to other threads. A
// store takes a mutex, swaps the value and gives it a generation no store in
// the process ever had, so a thread's entry can never match another
// Published that reuses a destroyed one's address.
//
// A thread holds the value it last loaded until it loads again or exits
// (kThreadEntries entries per thread, the oldest replaced first): a replaced
// value may live on a little while in an idle thread, never longer.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "gateway/platform/local_ref.hpp"

namespace dpgate::gateway {

namespace published_detail {

// Process-wide and only increasing: every store's generation is unique.
uint64_t nextGeneration();

struct ThreadEntry {
    ThreadEntry() = default;
    ThreadEntry(const ThreadEntry&) = delete;
    ThreadEntry& operator=(const ThreadEntry&) = delete;
    ~ThreadEntry() { replaceHold(nullptr); }
    void replaceHold(Hold* fresh) noexcept {
        if (hold) release(hold);
        hold = fresh;
    }

    const void* owner = nullptr;
    uint64_t generation = 0;
    Hold* hold = nullptr;  // this thread's hold on the owner's value
};

inline constexpr size_t kThreadEntries = 8;

struct ThreadEntries {
    std::array<ThreadEntry, kThreadEntries> entries;
    size_t next = 0;  // the entry replaced next when none matches the owner
};

ThreadEntries& threadEntries();

}  // namespace published_detail

template <class T>
class Published {
public:
    explicit Published(std::shared_ptr<T> value = nullptr)
        : value_(std::move(value)), generation_(published_detail::nextGeneration()) {}
    Published(const Published&) = delete;
    Published& operator=(const Published&) = delete;

    // Readers see `value` from their next load() or local() on.
    void store(std::shared_ptr<T> value) {
        std::shared_ptr<T> old;
        {
            const std::lock_guard lock(mutex_);
            old = std::exchange(value_, std::move(value));
            generation_.store(published_detail::nextGeneration(), std::memory_order_release);
        }
    }

    // The value in force (null if null was stored), for this thread only.
    LocalRef<T> local() const {
        published_detail::ThreadEntry& entry = current();
        return LocalRef<T>(entry.hold, valueOf(*entry.hold));
    }

    // The value in force, to share with other threads: its copies count in
    // the value's own shared count.
    std::shared_ptr<T> load() const {
        const published_detail::Hold& hold = *current().hold;
        return std::shared_ptr<T>(hold.value, valueOf(hold));
    }

private:
    static T* valueOf(const published_detail::Hold& hold) {
        return static_cast<T*>(const_cast<void*>(hold.value.get()));  // stored as a T: the cast restores it
    }

    // This thread's entry for this owner, holding the value in force.
    published_detail::ThreadEntry& current() const {
        published_detail::ThreadEntries& mine = published_detail::threadEntries();
        const uint64_t generation = generation_.load(std::memory_order_acquire);
        published_detail::ThreadEntry* slot = nullptr;
        for (published_detail::ThreadEntry& entry : mine.entries)
            if (entry.owner == this) slot = &entry;
        if (slot == nullptr) {
            slot = &mine.entries[mine.next];
            mine.next = (mine.next + 1) % mine.entries.size();
            slot->owner = this;
            slot->generation = 0;  // no store has generation 0
            slot->replaceHold(nullptr);
        }
        if (slot->generation != generation) refresh(*slot);
        return *slot;
    }

    // The value in force and its generation, read together, into `slot`.
    void refresh(published_detail::ThreadEntry& slot) const {
        std::shared_ptr<T> value;
        uint64_t generation = 0;
        {
            const std::lock_guard lock(mutex_);
            value = value_;
            generation = generation_.load(std::memory_order_relaxed);
        }
        slot.replaceHold(new published_detail::Hold(std::move(value)));
        slot.generation = generation;  // after the hold: a failed allocation leaves the slot stale, not wrong
    }

    mutable std::mutex mutex_;
    std::shared_ptr<T> value_;
    std::atomic<uint64_t> generation_;
};

}  // namespace dpgate::gateway
