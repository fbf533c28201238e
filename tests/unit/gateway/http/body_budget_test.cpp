#include "gateway/http/body_budget.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace dpgate::gateway {
namespace {

TEST(BodyBudget, TakesWithinTheLimitAndRefusesBeyondIt) {
    BodyBudget budget;
    BodyBudget::Share a, b;
    EXPECT_TRUE(budget.take(a, 60, 100));
    EXPECT_TRUE(budget.take(a, 40, 100)) << "up to the limit exactly";
    EXPECT_FALSE(budget.take(b, 1, 100));
    EXPECT_EQ(b.bytes(), 0u) << "a refusal takes nothing";
    EXPECT_EQ(a.bytes(), 100u);
    EXPECT_EQ(budget.heldBytes(), 100u);
    // A single take larger than the limit never wraps into "fits".
    BodyBudget::Share c;
    EXPECT_FALSE(budget.take(c, UINT64_MAX, 100));
}

TEST(BodyBudget, AShareGivesBackOnceWhereverItMoved) {
    BodyBudget budget;
    {
        BodyBudget::Share first;
        ASSERT_TRUE(budget.take(first, 70, 100));
        BodyBudget::Share moved(std::move(first));
        EXPECT_EQ(first.bytes(), 0u);
        BodyBudget::Share assigned;
        ASSERT_TRUE(budget.take(assigned, 10, 100));
        assigned = std::move(moved);  // gives back its own 10, takes over the 70
        EXPECT_EQ(budget.heldBytes(), 70u);
    }
    EXPECT_EQ(budget.heldBytes(), 0u);
}

TEST(BodyBudget, ConcurrentTakesNeverGoBeyondTheLimit) {
    BodyBudget budget;
    constexpr uint64_t kLimit = 1000;
    std::vector<std::thread> threads;
    std::atomic<uint64_t> peak{0};
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 20000; ++i) {
                BodyBudget::Share share;
                if (budget.take(share, 300, kLimit)) {
                    uint64_t held = budget.heldBytes(), seen = peak.load();
                    while (held > seen && !peak.compare_exchange_weak(seen, held)) {
                    }
                }
            }
        });
    for (std::thread& t : threads) t.join();
    EXPECT_LE(peak.load(), kLimit);
    EXPECT_EQ(budget.heldBytes(), 0u);
}

}  // namespace
}  // namespace dpgate::gateway
