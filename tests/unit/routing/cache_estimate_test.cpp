#include "routing/cache_estimate.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "routing/hash64.hpp"

using namespace dpgate::routing;

namespace {

SlotChooser eightRanks() {
    std::vector<Slot> slots;
    for (uint32_t r = 0; r < 8; ++r) slots.push_back({0, "primary", r});
    return SlotChooser(slots);
}

}  // namespace

TEST(CacheEstimate, UnknownKeyExpectsNothingCached) {
    CacheEstimate estimate;
    EXPECT_EQ(estimate.cachedTokens(42, 7, 10'000), 0);
    SlotChooser chooser = eightRanks();
    std::vector<double> uncached(8, -1);
    estimate.uncachedTokens(42, chooser, 10'000, uncached);
    for (double u : uncached) EXPECT_EQ(u, 10'000);
}

TEST(CacheEstimate, NextTurnExpectsThePreviousPromptOnItsSlot) {
    SlotChooser chooser = eightRanks();
    CacheEstimate estimate;
    estimate.record(42, chooser.slotId(3), 30'000);
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(3), 31'000), 30'000);
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(4), 31'000), 0);
    EXPECT_EQ(estimate.cachedTokens(43, chooser.slotId(3), 31'000), 0);  // another conversation
    // A shorter prompt (an edited conversation) cannot have more cached than itself.
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(3), 5'000), 5'000);

    std::vector<double> uncached(8);
    estimate.uncachedTokens(42, chooser, 31'000, uncached);
    for (size_t s = 0; s < 8; ++s) EXPECT_EQ(uncached[s], s == 3 ? 1'000 : 31'000) << "slot " << s;
}

TEST(CacheEstimate, RemembersHomeAndTheSlotItSpilledTo) {
    SlotChooser chooser = eightRanks();
    CacheEstimate estimate;
    estimate.record(42, chooser.slotId(1), 10'000);  // home
    estimate.record(42, chooser.slotId(5), 12'000);  // spilled
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(1), 14'000), 10'000);
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(5), 14'000), 12'000);
    estimate.record(42, chooser.slotId(1), 14'000);  // back home: the newest prompt is there
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(1), 15'000), 14'000);
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(5), 15'000), 12'000);
    estimate.record(42, chooser.slotId(6), 15'000);  // a third slot pushes out the oldest (5)
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(5), 16'000), 0);
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(1), 16'000), 14'000);
    EXPECT_EQ(estimate.cachedTokens(42, chooser.slotId(6), 16'000), 15'000);
}

TEST(CacheEstimate, AFullSetForgetsTheKeyRecordedLeastRecentlyNeverConfusesThem) {
    // One set of 4: a fifth key replaces the one recorded least recently.
    // Forgetting only makes the estimate expect less cached; it never
    // credits one conversation with another's prefix.
    CacheEstimate estimate(1);
    for (uint64_t k = 1; k <= 4; ++k) estimate.record(k, 100, 1'000.0 * double(k));
    estimate.record(1, 100, 8'000);  // key 1 is recent again: key 2 is now the oldest
    estimate.record(5, 100, 9'000);
    EXPECT_EQ(estimate.cachedTokens(2, 100, 10'000), 0);
    EXPECT_EQ(estimate.cachedTokens(1, 100, 10'000), 8'000);
    EXPECT_EQ(estimate.cachedTokens(3, 100, 10'000), 3'000);
    EXPECT_EQ(estimate.cachedTokens(4, 100, 10'000), 4'000);
    EXPECT_EQ(estimate.cachedTokens(5, 100, 10'000), 9'000);
}

TEST(CacheEstimate, ThousandsOfConversationsAreRemembered) {
    // 4,000 keys in the default 65,536 entries: a direct-mapped table would
    // forget about one in 33 (4,000^2 / 2 / 65,536 = 122 collisions); sets
    // of 4 forget a key only when a fifth lands in its set.
    CacheEstimate estimate;
    for (uint64_t k = 0; k < 4'000; ++k) estimate.record(mix64(k + 1), 7, 100 + double(k));
    int forgotten = 0;
    for (uint64_t k = 0; k < 4'000; ++k) {
        double cached = estimate.cachedTokens(mix64(k + 1), 7, 1e9);
        if (cached == 0) ++forgotten;
        else EXPECT_EQ(cached, 100 + double(k));  // never another key's
    }
    EXPECT_LE(forgotten, 2);
}

TEST(CacheEstimate, SlotIdentityOutlivesTableRebuilds) {
    // The gateway rebuilds its slot table on failover; an estimate keyed by
    // index would credit the wrong rank. Same (backend, rank), same id.
    SlotChooser both({{0, "primary", 0}, {0, "primary", 1}, {1, "standby", 0}, {1, "standby", 1}});
    SlotChooser standby_only({{1, "standby", 0}, {1, "standby", 1}});
    CacheEstimate estimate;
    estimate.record(42, both.slotId(3), 20'000);  // standby rank 1
    std::vector<double> uncached(2);
    estimate.uncachedTokens(42, standby_only, 21'000, uncached);
    EXPECT_EQ(uncached[0], 21'000);
    EXPECT_EQ(uncached[1], 1'000);
    EXPECT_EQ(SlotChooser::slotIdOf({7, "standby", 1}), both.slotId(3));
}

TEST(CacheEstimate, LastSlotNamesWhereTheKeyWentLastIfThatSlotIsInTheTable) {
    CacheEstimate estimate;
    SlotChooser chooser = eightRanks();
    EXPECT_EQ(estimate.lastSlot(5, chooser), std::nullopt);
    estimate.record(5, chooser.slotId(2), 3'000);
    EXPECT_EQ(estimate.lastSlot(5, chooser), 2u);
    estimate.record(5, chooser.slotId(6), 3'500);
    EXPECT_EQ(estimate.lastSlot(5, chooser), 6u);
    // After failover the table holds the standby's ranks: not there, unknown.
    std::vector<Slot> standby;
    for (uint32_t r = 0; r < 8; ++r) standby.push_back({1, "standby", r});
    EXPECT_EQ(estimate.lastSlot(5, SlotChooser(standby)), std::nullopt);
}
