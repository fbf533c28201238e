// A lock for the few dozen instructions of routing state every request
// touches (the cache estimate's stripes, the work meter's shards). Taking it
// is one locked instruction (an exchange) and releasing it a plain store;
// std::mutex takes two locked instructions, one to lock and one to unlock,
// and a locked instruction costs about 14 ns on these machines. A waiter
// spins on a plain load, then yields the core: a holder its thread's core
// was taken from gets it back.
#pragma once

#include <atomic>
#include <thread>

namespace dpgate::routing {

class SpinLock {
public:
    SpinLock() = default;
    SpinLock(const SpinLock&) = delete;
    SpinLock& operator=(const SpinLock&) = delete;

    void lock() noexcept {
        while (held_.exchange(true, std::memory_order_acquire)) {
            for (unsigned spins = 0; held_.load(std::memory_order_relaxed); ++spins) {
                if (spins < kSpinsBeforeYield) relax();
                else std::this_thread::yield();
            }
        }
    }
    bool try_lock() noexcept {
        return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { held_.store(false, std::memory_order_release); }

private:
    // Critical sections are shorter than a hundred spins; past them the
    // holder is more likely off its core than still working.
    static constexpr unsigned kSpinsBeforeYield = 100;
    static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }

    std::atomic<bool> held_{false};
};

}  // namespace dpgate::routing
