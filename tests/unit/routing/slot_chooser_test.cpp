#include "routing/slot_chooser.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "routing/hash64.hpp"

using namespace dpgate::routing;

namespace {

std::vector<Slot> slotsOf(const std::vector<std::string>& backends, uint32_t ranks) {
    std::vector<Slot> slots;
    for (size_t b = 0; b < backends.size(); ++b)
        for (uint32_t r = 0; r < ranks; ++r) slots.push_back({b, backends[b], r});
    return slots;
}

uint64_t keyOf(int i) { return hashBytes("conversation-" + std::to_string(i), 1); }

// Reproducible values in [0, max): the same sequence on every run.
class Noise {
public:
    explicit Noise(uint64_t seed) : seed_(seed) {}
    double operator()(double max) { return double((seed_ = mix64(seed_)) % 1000) / 1000.0 * max; }

private:
    uint64_t seed_;
};

std::pair<std::string, uint32_t> identity(const SlotChooser& chooser, size_t slot) {
    return {chooser.slots()[slot].backend_name, chooser.slots()[slot].rank};
}

}  // namespace

TEST(SlotChooser, DeterministicAcrossInstances) {
    SlotChooser a(slotsOf({"primary", "standby"}, 8));
    SlotChooser b(slotsOf({"primary", "standby"}, 8));
    std::vector<double> loads(16, 0.0);
    for (int i = 0; i < 1000; ++i) {
        EXPECT_EQ(a.choose(keyOf(i), loads, 1000), b.choose(keyOf(i), loads, 1000));
        EXPECT_EQ(a.rendezvousOrder(keyOf(i)), b.rendezvousOrder(keyOf(i)));
    }
}

TEST(SlotChooser, ConfigOrderDoesNotMatter) {
    SlotChooser ab(slotsOf({"a", "b"}, 8));
    SlotChooser ba(slotsOf({"b", "a"}, 8));
    std::vector<double> loads(16, 0.0);
    for (int i = 0; i < 1000; ++i)
        EXPECT_EQ(identity(ab, ab.choose(keyOf(i), loads, 1)), identity(ba, ba.choose(keyOf(i), loads, 1)));
}

TEST(SlotChooser, SpreadsKeysUniformly) {
    SlotChooser chooser(slotsOf({"a", "b"}, 8));
    std::vector<double> loads(16, 0.0);
    std::vector<int> counts(16, 0);
    const int keys = 10'000;
    for (int i = 0; i < keys; ++i) ++counts[chooser.choose(keyOf(i), loads, 1)];
    const double expected = keys / 16.0;
    for (size_t s = 0; s < counts.size(); ++s) {
        EXPECT_GT(counts[s], expected * 0.85) << "slot " << s;
        EXPECT_LT(counts[s], expected * 1.15) << "slot " << s;
    }
}

TEST(SlotChooser, SequentialKeysSpreadToo) {
    // Keys that differ in low bits only (e.g. a bad upstream hash) still spread.
    SlotChooser chooser(slotsOf({"a"}, 8));
    std::vector<double> loads(8, 0.0);
    std::vector<int> counts(8, 0);
    for (uint64_t k = 0; k < 8000; ++k) ++counts[chooser.choose(k, loads, 1)];
    for (int c : counts) {
        EXPECT_GT(c, 850);
        EXPECT_LT(c, 1150);
    }
}

TEST(SlotChooser, RemovingABackendMovesOnlyItsKeys) {
    SlotChooser both(slotsOf({"a", "b"}, 8));
    SlotChooser only_a(slotsOf({"a"}, 8));
    std::vector<double> loads16(16, 0.0), loads8(8, 0.0);
    int moved = 0, kept = 0;
    for (int i = 0; i < 5000; ++i) {
        auto before = identity(both, both.choose(keyOf(i), loads16, 1));
        auto after = identity(only_a, only_a.choose(keyOf(i), loads8, 1));
        if (before.first == "a") {
            EXPECT_EQ(after, before) << "key " << i << " was on a surviving slot and moved";
            ++kept;
        } else {
            ++moved;
            // It goes to its next choice in the original order.
            auto order = both.rendezvousOrder(keyOf(i));
            auto next =
                std::find_if(order.begin(), order.end(), [&](size_t s) { return both.slots()[s].backend_name == "a"; });
            EXPECT_EQ(after, identity(both, *next));
        }
    }
    EXPECT_GT(moved, 2000);
    EXPECT_GT(kept, 2000);
}

TEST(SlotChooser, RemovingOneRankMovesOnlyItsKeys) {
    auto slots = slotsOf({"a"}, 8);
    SlotChooser full(slots);
    slots.erase(slots.begin() + 3);
    SlotChooser without3(slots);
    std::vector<double> loads8(8, 0.0), loads7(7, 0.0);
    int moved = 0;
    for (int i = 0; i < 4000; ++i) {
        auto before = identity(full, full.choose(keyOf(i), loads8, 1));
        auto after = identity(without3, without3.choose(keyOf(i), loads7, 1));
        if (before.second == 3) ++moved;
        else EXPECT_EQ(after, before);
    }
    EXPECT_NEAR(moved, 500, 100);
}

TEST(SlotChooser, IdleSystemNeverSpills) {
    SlotChooser chooser(slotsOf({"a"}, 8));
    std::vector<double> loads(8, 0.0);
    for (int i = 0; i < 1000; ++i) {
        uint64_t k = keyOf(i);
        EXPECT_EQ(chooser.choose(k, loads, 50'000), chooser.rendezvousOrder(k).front());
    }
    // One request already in flight somewhere is not overload either.
    for (int i = 0; i < 1000; ++i) {
        uint64_t k = keyOf(i);
        size_t home = chooser.rendezvousOrder(k).front();
        std::vector<double> one(8, 0.0);
        one[home] = 1000;
        EXPECT_EQ(chooser.choose(k, one, 1000), home);
    }
}

TEST(SlotChooser, OverloadedSlotSpillsToTheKeysNextChoice) {
    // One whole request of slack, no token slack: the bound arithmetic below.
    SlotChooser chooser(slotsOf({"a"}, 8), {.balance_factor = 1.25, .slack_requests = 1.0, .slack_tokens = 0});
    for (int i = 0; i < 500; ++i) {
        uint64_t k = keyOf(i);
        auto order = chooser.rendezvousOrder(k);
        std::vector<double> loads(8, 1000.0);
        loads[order[0]] = 10'000;  // bound = 1.25 * (17'000 + 1'000) / 8 + 1'000 = 3'812.5
        EXPECT_EQ(chooser.choose(k, loads, 1000), order[1]);
        auto pref = chooser.preference(k, loads, 1000);
        EXPECT_EQ(pref.front(), order[1]);
        EXPECT_EQ(pref.back(), order[0]);  // still listed, last
        // bound = 1.25 * (7'000 + 2'400 + 1'000) / 8 + 1'000 = 2'625: stays home.
        loads[order[0]] = 2'400;
        EXPECT_EQ(chooser.choose(k, loads, 1000), order[0]);
        // bound = 1.25 * (7'000 + 2'700 + 1'000) / 8 + 1'000 = 2'671.9: spills.
        loads[order[0]] = 2'700;
        EXPECT_EQ(chooser.choose(k, loads, 1000), order[1]);
        loads[order[0]] = 2'400;
        EXPECT_EQ(chooser.choose(k, loads, 1000), order[0]);
    }
}

TEST(SlotChooser, PreferenceAgreesWithChooseAndIsAPermutation) {
    SlotChooser chooser(slotsOf({"a", "b"}, 8));
    std::vector<double> loads;
    for (int s = 0; s < 16; ++s) loads.push_back(double((s * 7919) % 13) * 1000);
    for (int i = 0; i < 1000; ++i) {
        auto pref = chooser.preference(keyOf(i), loads, 2000);
        EXPECT_EQ(pref.front(), chooser.choose(keyOf(i), loads, 2000));
        auto sorted = pref;
        std::sort(sorted.begin(), sorted.end());
        for (size_t s = 0; s < sorted.size(); ++s) ASSERT_EQ(sorted[s], s);
        double bound = chooser.loadBound(loads, 2000);
        EXPECT_LE(loads[pref.front()], bound);
    }
}

TEST(SlotChooser, BoundedLoadKeepsHotKeysFromPilingUp) {
    // One very hot key and many cold ones; feed loads back as requests land.
    SlotChooser chooser(slotsOf({"a"}, 8));
    std::vector<double> loads(8, 0.0);
    for (int i = 0; i < 4000; ++i) {
        uint64_t k = (i % 2 == 0) ? keyOf(0) : keyOf(i);
        loads[chooser.choose(k, loads, 100)] += 100;
    }
    double total = 0, max = 0;
    for (double l : loads) total += l, max = std::max(max, l);
    // A slot takes a request only while within the bound: at most the bound
    // (1.25 x mean + a quarter request + 2,048 tokens) plus that request.
    EXPECT_LE(max, 1.25 * total / 8 + 0.25 * 100 + 2048 + 100);
    EXPECT_GE(max, 1.25 * total / 8);  // the hot key does fill its home up to the bound
}

TEST(SlotChooser, KnownPlacementsAreStableAcrossBuilds) {
    // Replicas running different releases must agree; a change of hash or
    // mix function moves every conversation off its cache. Pin a few.
    SlotChooser chooser(slotsOf({"primary", "standby"}, 8));
    EXPECT_EQ(identity(chooser, chooser.rendezvousOrder(keyOf(0))[0]), std::make_pair(std::string("standby"), 1u));
    EXPECT_EQ(identity(chooser, chooser.rendezvousOrder(keyOf(0))[1]), std::make_pair(std::string("primary"), 4u));
    EXPECT_EQ(identity(chooser, chooser.rendezvousOrder(keyOf(3))[0]), std::make_pair(std::string("standby"), 3u));
    EXPECT_EQ(identity(chooser, chooser.rendezvousOrder(keyOf(4))[0]), std::make_pair(std::string("standby"), 6u));
}

// --- Loads and costs in prompt tokens not expected in cache (RouteRequest) ---

TEST(SlotChooser, HomeWithinTheBoundIgnoresLoadsAndCosts) {
    // Determinism between replicas: while a key's home is not overloaded the
    // choice is its home, whatever the other slots carry and whatever each
    // replica's cache estimate says.
    SlotChooser chooser(slotsOf({"a", "b"}, 8));
    Noise next(1);
    for (int i = 0; i < 1000; ++i) {
        uint64_t k = keyOf(i);
        size_t home = chooser.rendezvousOrder(k).front();
        std::vector<double> loads(16), uncached(16);
        double others = 0;
        for (size_t s = 0; s < 16; ++s) {
            loads[s] = s == home ? 0 : next(20'000);
            uncached[s] = next(30'000);
            others += loads[s];
        }
        loads[home] = 1.25 * others / 16;  // at most the bound, which also counts home's own load
        EXPECT_EQ(chooser.choose({k, loads, uncached, 30'000, {}, std::nullopt}), home);
    }
}

TEST(SlotChooser, CachedTurnStaysOnAnOverloadedHomeWhileLeavingCostsMore) {
    SlotChooser chooser(slotsOf({"a"}, 8));
    uint64_t k = keyOf(7);
    size_t home = chooser.rendezvousOrder(k).front();
    std::vector<double> loads(8, 0.0), uncached(8, 30'000.0);
    uncached[home] = 1'000;  // 29k of the 30k prompt cached at home
    // bound = 1.25 x 21'000 / 8 + 0.25 x 30'000 + 2'048 = 12'829: home is over
    // it, but 20'000 + 1'000 there beats 0 + 30'000 anywhere else.
    loads[home] = 20'000;
    EXPECT_EQ(chooser.choose({k, loads, uncached, 30'000, {}, std::nullopt}), home);
    // 40'000 + 1'000 no longer does.
    loads[home] = 40'000;
    size_t away = chooser.choose({k, loads, uncached, 30'000, {}, std::nullopt});
    EXPECT_NE(away, home);
    EXPECT_EQ(away, chooser.rendezvousOrder(k)[1]);  // every other slot idle: rendezvous order decides
}

TEST(SlotChooser, OverloadedHomeSendsAFreshRequestWhereItFinishesFirst) {
    SlotChooser chooser(slotsOf({"a"}, 8));
    for (int i = 0; i < 200; ++i) {
        uint64_t k = keyOf(i);
        auto order = chooser.rendezvousOrder(k);
        std::vector<double> loads(8, 3'000.0), uncached(8, 4'000.0);
        loads[order[0]] = 40'000;
        loads[order[1]] = 5'000;
        loads[order[2]] = 0;
        // bound = 1.25 x 64'000 / 8 + 1'000 + 2'048 = 13'048: only home is over.
        EXPECT_EQ(chooser.choose({k, loads, uncached, 4'000, {}, std::nullopt}), order[2]);
        auto pref = chooser.preference({k, loads, uncached, 4'000, {}, std::nullopt});
        EXPECT_EQ(pref.front(), order[2]);
        EXPECT_EQ(pref.back(), order[0]);
    }
}

TEST(SlotChooser, SpilledConversationFollowsItsPrefixUntilHomeRecovers) {
    SlotChooser chooser(slotsOf({"a"}, 8));
    uint64_t k = keyOf(11);
    auto order = chooser.rendezvousOrder(k);
    std::vector<double> loads(8, 0.0), uncached(8, 20'000.0);
    uncached[order[3]] = 1'000;  // its last turn spilled to its fourth choice
    loads[order[0]] = 40'000;
    EXPECT_EQ(chooser.choose({k, loads, uncached, 20'000, {}, std::nullopt}), order[3]);
    // Home drained: a chooser not told where the key went last sends it
    // back home, as a replica that never saw it would, though the freshest
    // prefix is elsewhere (AKnownKeyStaysOnTheSlotThatServedItLast: the
    // gateway that did see it keeps it there).
    loads[order[0]] = 0;
    EXPECT_EQ(chooser.choose({k, loads, uncached, 20'000, {}, std::nullopt}), order[0]);
}

TEST(SlotChooser, SlackIsSmallButANearlyIdleHomeKeepsItsKeys) {
    SlotChooser chooser(slotsOf({"a"}, 8));
    for (int i = 0; i < 300; ++i) {
        uint64_t k = keyOf(i);
        size_t home = chooser.rendezvousOrder(k).front();
        for (double prompt : {1.0, 1'000.0, 100'000.0}) {
            std::vector<double> loads(8, 0.0), uncached(8, prompt);
            loads[home] = 2'048;  // up to slack_tokens queued at home: never a spill
            EXPECT_EQ(chooser.choose({k, loads, uncached, prompt, {}, std::nullopt}), home);
        }
        // One 60k-token prefill queued at home, every other slot idle: a
        // fresh 1k-token request would wait 1.2 s at 50k tokens/s. Spill.
        std::vector<double> loads(8, 0.0), uncached(8, 1'000.0);
        loads[home] = 60'000;
        EXPECT_NE(chooser.choose({k, loads, uncached, 1'000, {}, std::nullopt}), home);
    }
}

TEST(SlotChooser, RouteRequestPreferenceIsAPermutationLedByChoose) {
    SlotChooser chooser(slotsOf({"a", "b"}, 8));
    std::vector<double> loads, uncached;
    for (int s = 0; s < 16; ++s) {
        loads.push_back(double((s * 7919) % 13) * 4000);
        uncached.push_back(double((s * 104729) % 7) * 3000);
    }
    for (int i = 0; i < 1000; ++i) {
        RouteRequest request{keyOf(i), loads, uncached, 20'000, {}, std::nullopt};
        auto pref = chooser.preference(request);
        EXPECT_EQ(pref.front(), chooser.choose(request));
        auto sorted = pref;
        std::sort(sorted.begin(), sorted.end());
        for (size_t s = 0; s < sorted.size(); ++s) ASSERT_EQ(sorted[s], s);
    }
}

TEST(SlotChooser, AKnownKeyStaysOnTheSlotThatServedItLast) {
    // A conversation that once spilled keeps its prefix where it went: the
    // gateway passes that slot (CacheEstimate::lastSlot) and the chooser
    // stays there while it is within the in-flight bound, even once home is
    // idle again.
    SlotChooser chooser(slotsOf({"a"}, 8));
    for (int i = 0; i < 100; ++i) {
        uint64_t k = keyOf(i);
        auto order = chooser.rendezvousOrder(k);
        std::vector<double> loads(8, 0.0), uncached(8, 20'000.0), work(8, 0.0);
        uncached[order[3]] = 1'000;
        EXPECT_EQ(chooser.choose({k, loads, uncached, 20'000, work, order[3]}), order[3]);
        // Not known: home, as every replica would send it.
        EXPECT_EQ(chooser.choose({k, loads, uncached, 20'000, work, std::nullopt}), order[0]);
        // Its slot overloaded and leaving cheaper: the in-flight rule still applies.
        loads[order[3]] = 200'000;
        size_t away = chooser.choose({k, loads, uncached, 20'000, work, order[3]});
        EXPECT_NE(away, order[3]);
        EXPECT_EQ(away, order[0]);  // every other slot idle and equally uncached: rendezvous order
    }
}

TEST(SlotChooser, ANewKeyAvoidsAHomeThatDidMoreThanItsShareOfRecentWork) {
    SlotChooser chooser(slotsOf({"a", "b"}, 8));  // work_factor 1.0, work_slack_tokens 16'384
    for (int i = 0; i < 300; ++i) {
        uint64_t k = keyOf(i);
        auto order = chooser.rendezvousOrder(k);
        std::vector<double> loads(16, 0.0), uncached(16, 5'000.0), work(16, 10'000.0);
        // mean = (100'000 + 15 x 10'000) / 16 = 15'625; bound = 32'009.
        work[order[0]] = 100'000;
        EXPECT_EQ(chooser.anchor({k, loads, uncached, 5'000, work, std::nullopt}), order[1]);
        EXPECT_EQ(chooser.choose({k, loads, uncached, 5'000, work, std::nullopt}), order[1]);
        // Among the slots within the work bound, the least loaded.
        loads[order[1]] = 1'000;
        loads[order[2]] = 500;
        EXPECT_EQ(chooser.choose({k, loads, uncached, 5'000, work, std::nullopt}), order[3]);
        // Home's excess within the slack: home.
        work[order[0]] = 25'000;  // mean 10'938, bound 27'322
        EXPECT_EQ(chooser.choose({k, loads, uncached, 5'000, work, std::nullopt}), order[0]);
        // Turned off: home whatever the work.
        SlotChooser off(slotsOf({"a", "b"}, 8), {.work_factor = 0});
        work[order[0]] = 1e9;
        EXPECT_EQ(off.choose({k, loads, uncached, 5'000, work, std::nullopt}), order[0]);
    }
}

TEST(SlotChooser, ANearlyIdleSystemSendsEveryNewKeyHome) {
    // The replicas' agreement: work spread within the slack and homes with at
    // most the in-flight slack queued, whatever else the slots carry.
    SlotChooser chooser(slotsOf({"a", "b"}, 8));
    Noise next(3);
    for (int i = 0; i < 1000; ++i) {
        uint64_t k = keyOf(i);
        size_t home = chooser.rendezvousOrder(k).front();
        std::vector<double> loads(16), uncached(16, 3'000.0), work(16);
        for (size_t s = 0; s < 16; ++s) {
            loads[s] = s == home ? next(2'048 + 0.25 * 3'000) : next(2'000);
            work[s] = next(16'384);  // home is at most 16'384 over any mean
        }
        EXPECT_EQ(chooser.choose({k, loads, uncached, 3'000, work, std::nullopt}), home);
    }
}

TEST(SlotChooser, ABusyHomeSendsANewKeyToTheLeastLoadedSlot) {
    SlotChooser chooser(slotsOf({"a"}, 8));
    for (int i = 0; i < 100; ++i) {
        uint64_t k = keyOf(i);
        auto order = chooser.rendezvousOrder(k);
        std::vector<double> loads(8, 4'000.0), uncached(8, 1'000.0), work(8, 0.0);
        loads[order[5]] = 100;
        // Home holds 4'000 queued tokens, over 2'048 + 250 of slack but far
        // under the in-flight bound (1.25 x 33'000 / 8 + 2'298): only a new
        // key moves.
        EXPECT_EQ(chooser.choose({k, loads, uncached, 1'000, work, std::nullopt}), order[5]);
        EXPECT_EQ(chooser.choose({k, loads, uncached, 1'000, work, order[0]}), order[0]);
    }
}
