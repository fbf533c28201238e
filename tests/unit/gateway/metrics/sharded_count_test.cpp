#include "gateway/metrics/sharded_count.hpp"
#include "gateway/metrics/metric_family.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace dpgate::metrics {
namespace {

TEST(ShardedCount, EveryAddFromEveryThreadIsInTheSum) {
    ShardedCount<int64_t> count;
    constexpr int kThreads = 12;  // more threads than shards: some share a cell
    constexpr int kRounds = 50000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&count, t] {
            for (int i = 0; i < kRounds; ++i) {
                count.add(t + 2);
                count.sub(1);
            }
        });
    for (std::thread& thread : threads) thread.join();
    int64_t expected = 0;
    for (int t = 0; t < kThreads; ++t) expected += int64_t(kRounds) * (t + 1);
    EXPECT_EQ(count.value(), expected);
}

TEST(ShardedCount, UpAndDownOnDifferentThreadsCancels) {
    // A request in flight is taken on one thread and may be given back on
    // another (an admission offloaded and resumed): the sum still returns to 0.
    ShardedCount<int64_t> count;
    std::thread up([&] {
        for (int i = 0; i < 1000; ++i) count.add(1);
    });
    up.join();
    EXPECT_EQ(count.value(), 1000);
    std::thread down([&] {
        for (int i = 0; i < 1000; ++i) count.sub(1);
    });
    down.join();
    EXPECT_EQ(count.value(), 0);
}

TEST(ShardedCount, ThreadsWithoutACellOfTheirOwnTakeTheSharedOnesInTurn) {
    std::mutex mutex;
    std::set<size_t> shards;
    std::vector<std::thread> threads;
    for (size_t t = 0; t < kShards - kOwnedShards; ++t)
        threads.emplace_back([&] {
            const size_t mine = threadShard();
            EXPECT_EQ(threadShard(), mine);  // fixed for the thread's life
            EXPECT_GE(mine, kOwnedShards);
            std::lock_guard lock(mutex);
            shards.insert(mine);
        });
    for (std::thread& thread : threads) thread.join();
    // Consecutive turns: as many threads as shared cells take all of them.
    EXPECT_EQ(shards.size(), kShards - kOwnedShards);
}

TEST(ShardOwner, OwnersTakeDistinctCellsUntilNoneIsLeftAndFreeThemOnExit) {
    // More owners at once than cells to own: each cell goes to one thread,
    // the rest stay on shared cells; counts from both kinds add up exactly.
    ShardedCount<int64_t> count;
    constexpr size_t kThreads = kOwnedShards + 4;
    constexpr int kRounds = 20000;
    std::mutex mutex;
    std::set<size_t> owned;
    size_t owners = 0;
    std::atomic<size_t> ready{0};
    std::vector<std::thread> threads;
    for (size_t t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            const ShardOwner owner;
            ++ready;
            while (ready.load() < kThreads) std::this_thread::yield();  // all hold their claim at once
            const size_t mine = threadShard();
            EXPECT_EQ(owner.owns(), mine < kOwnedShards);
            for (int i = 0; i < kRounds; ++i) {
                count.add(3);
                count.sub(1);
            }
            std::lock_guard lock(mutex);
            if (owner.owns()) {
                ++owners;
                owned.insert(mine);
            }
        });
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(owners, kOwnedShards);
    EXPECT_EQ(owned.size(), kOwnedShards);  // no cell had two owners
    EXPECT_EQ(count.value(), int64_t(kThreads) * kRounds * 2);

    // Freed on exit: the next owners take the cells again and add to what
    // is in them.
    std::thread([&] {
        const ShardOwner owner;
        EXPECT_TRUE(owner.owns());
        count.add(7);
    }).join();
    EXPECT_EQ(count.value(), int64_t(kThreads) * kRounds * 2 + 7);
}

TEST(ShardOwner, AThreadAfterItsOwnershipCountsInASharedCell) {
    ShardedCount<uint64_t> count;
    std::thread([&] {
        {
            const ShardOwner owner;
            ASSERT_TRUE(owner.owns());
            EXPECT_LT(threadShard(), kOwnedShards);
            count.add(2);
        }
        EXPECT_GE(threadShard(), kOwnedShards);
        count.add(3);
    }).join();
    EXPECT_EQ(count.value(), 5u);
}

TEST(ShardedCount, UnsignedCountsWrapLikeOne) {
    ShardedCount<uint64_t> count;
    count.add(5);
    std::thread([&] { count.add(UINT64_MAX); }).join();  // -1 in another cell
    EXPECT_EQ(count.value(), 4u);
    std::thread([&] {
        const ShardOwner owner;  // an owned cell wraps the same way
        count.add(UINT64_MAX);
        count.sub(UINT64_MAX - 1);
    }).join();
    EXPECT_EQ(count.value(), 5u);
}

TEST(Gauge, SetAndMovedGaugesFromManyThreads) {
    Gauge moved;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 10000; ++i) moved.inc();
            for (int i = 0; i < 9000; ++i) moved.dec();
        });
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(moved.value(), 4000);

    Gauge set;
    set.set(7);
    std::thread([&] { set.set(-3); }).join();
    EXPECT_EQ(set.value(), -3);  // the last set, whichever thread set it
}

TEST(Counter, IncFromManyThreads) {
    Counter counter;
    std::vector<std::thread> threads;
    for (int t = 0; t < 9; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 10000; ++i) counter.inc(3);
        });
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(counter.value(), 270000u);
}

}  // namespace
}  // namespace dpgate::metrics
