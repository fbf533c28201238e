#include "gateway/platform/published.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dpgate::gateway {
namespace {

TEST(Published, LoadSeesTheLatestStoreOnEveryThread) {
    Published<const std::string> value(std::make_shared<const std::string>("first"));
    EXPECT_EQ(*value.load(), "first");
    std::string seen_elsewhere;
    std::thread([&] { seen_elsewhere = *value.load(); }).join();
    EXPECT_EQ(seen_elsewhere, "first");

    value.store(std::make_shared<const std::string>("second"));
    EXPECT_EQ(*value.load(), "second");  // this thread's entry for "first" is stale
    std::thread([&] { seen_elsewhere = *value.load(); }).join();
    EXPECT_EQ(seen_elsewhere, "second");

    value.store(nullptr);
    EXPECT_FALSE(value.load());
}

TEST(Published, ALoadedValueOutlivesTheStoreThatReplacesIt) {
    Published<std::string> value(std::make_shared<std::string>("old"));
    std::shared_ptr<std::string> held = value.load();
    std::weak_ptr<std::string> watch;
    {
        std::shared_ptr<std::string> original = value.load();
        watch = std::weak_ptr<std::string>(original);
    }
    value.store(std::make_shared<std::string>("new"));
    EXPECT_EQ(*held, "old");
    EXPECT_EQ(*value.load(), "new");
    held.reset();
    EXPECT_TRUE(watch.expired());  // freed once the last reader let go (this thread reloaded)
}

TEST(Published, ALocalReferenceOutlivesTheStoreThatReplacesItAndItsThreadsNextLoad) {
    Published<std::string> value(std::make_shared<std::string>("old"));
    std::weak_ptr<std::string> watch = value.load();
    LocalRef<std::string> held = value.local();
    LocalRef<std::string> copy = held;  // counted on this thread
    value.store(std::make_shared<std::string>("new"));
    EXPECT_EQ(*value.local(), "new");  // the thread's entry moved on to the new value
    EXPECT_EQ(*held, "old");
    EXPECT_EQ(copy.get(), held.get());
    held.reset();
    EXPECT_FALSE(held);
    EXPECT_FALSE(watch.expired()) << "a copy still holds it";
    LocalRef<std::string> moved = std::move(copy);
    EXPECT_FALSE(copy);  // NOLINT(bugprone-use-after-move): a moved-from reference is empty
    EXPECT_EQ(*moved, "old");
    moved = value.local();  // assignment drops the last reference to the old value
    EXPECT_TRUE(watch.expired());
    EXPECT_EQ(*moved, "new");
}

TEST(Published, LocalAndSharedReadsSeeTheSameValue) {
    Published<const std::string> value(std::make_shared<const std::string>("one"));
    EXPECT_EQ(value.local().get(), value.load().get());
    value.store(nullptr);
    EXPECT_FALSE(value.local());
    EXPECT_FALSE(value.load());
}

TEST(Published, AThreadsHoldIsFreedWhenTheThreadExits) {
    Published<std::string> value(std::make_shared<std::string>("first"));
    std::weak_ptr<std::string> watch = value.load();
    std::thread([&] {
        LocalRef<std::string> mine = value.local();
        EXPECT_EQ(*mine, "first");
    }).join();
    value.store(std::make_shared<std::string>("second"));
    EXPECT_EQ(*value.load(), "second");
    EXPECT_TRUE(watch.expired()) << "the exited thread's entry let go of it";
}

// The references of an exited thread, dropped on another (a worker's
// coroutine frames when the thread that destroys its io_context drops them).
TEST(Published, LocalReferencesOutliveTheThreadThatLoadedThem) {
    Published<std::string> value(std::make_shared<std::string>("first"));
    std::weak_ptr<std::string> watch = value.load();
    LocalRef<std::string> kept;
    std::thread([&] { kept = value.local(); }).join();
    value.store(std::make_shared<std::string>("second"));
    EXPECT_EQ(*value.load(), "second");
    EXPECT_EQ(*kept, "first");
    EXPECT_FALSE(watch.expired());
    kept.reset();
    EXPECT_TRUE(watch.expired());
}

TEST(Published, ManyOwnersOnOneThreadEachKeepTheirOwnValue) {
    // More owners than a thread has entries: they evict each other and
    // still answer right.
    std::vector<std::unique_ptr<Published<const int>>> owners;
    for (int i = 0; i < 20; ++i)
        owners.push_back(std::make_unique<Published<const int>>(std::make_shared<const int>(i)));
    for (int round = 0; round < 3; ++round)
        for (int i = 0; i < 20; ++i) {
            EXPECT_EQ(*owners[size_t(i)]->load(), i);
            EXPECT_EQ(*owners[size_t(i)]->local(), i);
        }
}

TEST(Published, AnOwnerAtAReusedAddressIsNeverServedTheOldValue) {
    auto first = std::make_unique<Published<const int>>(std::make_shared<const int>(1));
    EXPECT_EQ(*first->load(), 1);
    const void* where = first.get();
    first.reset();
    auto second = std::make_unique<Published<const int>>(std::make_shared<const int>(2));
    // Same address or not, the generation differs.
    EXPECT_EQ(*second->load(), 2) << (second.get() == where ? "reused address" : "new address");
}

TEST(Published, ReadersRacingStoresAlwaysSeeAWholeValueAndThenTheLast) {
    constexpr int kReaders = 3;
    constexpr int kStores = 2000;
    Published<const std::vector<int>> value(std::make_shared<const std::vector<int>>(64, 0));
    std::atomic<bool> stop{false};
    std::atomic<int> torn{0};
    std::array<std::atomic<int>, kReaders> last_seen{};
    std::vector<std::thread> readers;
    for (int t = 0; t < kReaders; ++t) {
        readers.emplace_back([&, t] {
            while (!stop.load()) {
                LocalRef<const std::vector<int>> v = value.local();
                const int first = v->front();
                for (int x : *v)
                    if (x != first) ++torn;
                last_seen[size_t(t)].store(first);
            }
        });
    }
    for (int generation = 1; generation <= kStores; ++generation)
        value.store(std::make_shared<const std::vector<int>>(64, generation));
    // Every reader comes to see the last store (bounded: a failure, not a hang).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto allCaughtUp = [&] {
        for (const auto& seen : last_seen)
            if (seen.load() != kStores) return false;
        return true;
    };
    while (!allCaughtUp() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    stop = true;
    for (std::thread& reader : readers) reader.join();
    EXPECT_EQ(torn.load(), 0);
    for (const auto& seen : last_seen) EXPECT_EQ(seen.load(), kStores);
}

}  // namespace
}  // namespace dpgate::gateway
