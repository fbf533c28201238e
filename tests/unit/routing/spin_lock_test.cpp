#include "routing/spin_lock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace dpgate::routing {
namespace {

TEST(SpinLock, LetsOneThreadInAtATime) {
    SpinLock lock;
    uint64_t count = 0;  // plain: only the lock keeps the increments whole (and TSan quiet)
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    constexpr int kThreads = 4, kRounds = 50'000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < kRounds; ++i) {
                std::lock_guard hold(lock);
                if (inside.fetch_add(1, std::memory_order_relaxed) != 0) overlaps.fetch_add(1);
                ++count;
                inside.fetch_sub(1, std::memory_order_relaxed);
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(count, uint64_t(kThreads) * kRounds);
}

TEST(SpinLock, TryLockFailsWhileHeldAndSucceedsAfter) {
    SpinLock lock;
    ASSERT_TRUE(lock.try_lock());
    bool taken_elsewhere = true;
    std::thread([&] { taken_elsewhere = lock.try_lock(); }).join();
    EXPECT_FALSE(taken_elsewhere);
    lock.unlock();
    std::thread([&] {
        taken_elsewhere = lock.try_lock();
        if (taken_elsewhere) lock.unlock();
    }).join();
    EXPECT_TRUE(taken_elsewhere);
}

// A holder off its core for long (here: asleep) keeps a waiter out past its
// spins, and the waiter gets in once it lets go.
TEST(SpinLock, AWaiterPastItsSpinsGetsInWhenTheHolderLetsGo) {
    SpinLock lock;
    std::atomic<bool> released{false};
    bool saw_release = false;
    lock.lock();
    std::thread waiter([&] {
        std::lock_guard hold(lock);
        saw_release = released.load();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    released.store(true);
    lock.unlock();
    waiter.join();
    EXPECT_TRUE(saw_release);
}

}  // namespace
}  // namespace dpgate::routing
