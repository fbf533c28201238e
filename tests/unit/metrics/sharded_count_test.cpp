#include "gateway/metrics/sharded_count.hpp"
#include "gateway/metrics/metric_family.hpp"

#include <gtest/gtest.h>

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

TEST(ShardedCount, ThreadsTakeShardsInTurn) {
    std::mutex mutex;
    std::set<size_t> shards;
    std::vector<std::thread> threads;
    for (size_t t = 0; t < kShards; ++t)
        threads.emplace_back([&] {
            const size_t mine = threadShard();
            EXPECT_EQ(threadShard(), mine);  // fixed for the thread's life
            std::lock_guard lock(mutex);
            shards.insert(mine);
        });
    for (std::thread& thread : threads) thread.join();
    // Each new thread takes the next turn: kShards threads that first ask
    // here take kShards consecutive turns, all different cells (which ones
    // depends on the threads earlier tests started).
    EXPECT_EQ(shards.size(), kShards);
}

TEST(ShardedCount, UnsignedCountsWrapLikeOne) {
    ShardedCount<uint64_t> count;
    count.add(5);
    std::thread([&] { count.add(UINT64_MAX); }).join();  // -1 in another cell
    EXPECT_EQ(count.value(), 4u);
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
