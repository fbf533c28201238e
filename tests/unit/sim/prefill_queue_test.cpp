#include "prefill_queue.hpp"

#include <gtest/gtest.h>

#include <chrono>

using namespace dpgate::sim;
using namespace std::chrono_literals;
using TimePoint = PrefillQueue::TimePoint;

namespace {

const TimePoint kStart = TimePoint{} + 1h;

TimePoint at(std::chrono::microseconds offset) { return kStart + offset; }

}  // namespace

TEST(PrefillQueue, OneAtATimeEachWaitsForEverythingAhead) {
    PrefillQueue queue(2us, 0);
    auto first = queue.add(200'000, at(0us));
    auto second = queue.add(200'000, at(0us));
    EXPECT_EQ(queue.doneAt(first, at(0us)), at(400ms));
    EXPECT_EQ(queue.doneAt(second, at(0us)), at(800ms));
    EXPECT_EQ(queue.doneAt(second, at(399ms)), at(800ms));
    EXPECT_EQ(queue.doneAt(first, at(400ms)), std::nullopt);
    EXPECT_EQ(queue.doneAt(second, at(400ms)), at(800ms));
    EXPECT_EQ(queue.doneAt(second, at(800ms)), std::nullopt);
}

TEST(PrefillQueue, AnIdleRankStartsAtArrival) {
    PrefillQueue queue(2us, 0);
    auto first = queue.add(1'000, at(0us));
    queue.remove(first, at(2ms));
    auto later = queue.add(1'000, at(1s));
    EXPECT_EQ(queue.doneAt(later, at(1s)), at(1s + 2ms));
    // An arrival after the rank went idle is not charged for the idle time.
    auto last = queue.add(500, at(1s + 500us));
    EXPECT_EQ(queue.doneAt(last, at(1s + 500us)), at(1s + 3ms));
}

TEST(PrefillQueue, RequestWithNothingToComputeIsDoneAtOnce) {
    PrefillQueue queue(2us, 0);
    auto busy = queue.add(1'000, at(0us));
    auto cached = queue.add(0, at(0us));
    EXPECT_EQ(queue.doneAt(cached, at(0us)), std::nullopt);
    EXPECT_EQ(queue.doneAt(busy, at(0us)), at(2ms));
}

TEST(PrefillQueue, HeadLeavingFreesTheRankAtOnce) {
    PrefillQueue queue(2us, 0);
    int woken = 0;
    auto first = queue.add(200'000, at(0us));
    auto second = queue.add(200'000, at(0us), [&] { ++woken; });
    queue.remove(first, at(100ms));
    EXPECT_EQ(woken, 1);
    EXPECT_EQ(queue.doneAt(second, at(100ms)), at(500ms));
}

TEST(PrefillQueue, WaitingRequestLeavingAdvancesOnlyThoseBehind) {
    PrefillQueue queue(1us, 0);
    auto a = queue.add(100, at(0us));
    auto b = queue.add(200, at(0us));
    auto c = queue.add(300, at(0us));
    EXPECT_EQ(queue.doneAt(c, at(0us)), at(600us));
    queue.remove(b, at(50us));
    EXPECT_EQ(queue.doneAt(a, at(50us)), at(100us));
    EXPECT_EQ(queue.doneAt(c, at(50us)), at(400us));
}

TEST(PrefillQueue, FinishingWakesNobody) {
    PrefillQueue queue(1us, 0);
    int woken = 0;
    auto a = queue.add(100, at(0us), [&] { ++woken; });
    auto b = queue.add(100, at(0us), [&] { ++woken; });
    EXPECT_EQ(queue.doneAt(a, at(100us)), std::nullopt);
    queue.remove(a, at(100us));
    queue.remove(b, at(300us));
    EXPECT_EQ(woken, 0);
}

TEST(PrefillQueue, SnapshotCountsWaitingPrefillingAndTokensLeft) {
    PrefillQueue queue(2us, 0);
    queue.add(200'000, at(0us));
    queue.add(100'000, at(0us));
    queue.add(50'000, at(0us));
    auto start = queue.snapshot(at(0us));
    EXPECT_EQ(start.prefilling, 1u);
    EXPECT_EQ(start.waiting, 2u);
    EXPECT_EQ(start.queued_tokens, 350'000u);
    // A quarter into the first prefill.
    EXPECT_EQ(queue.snapshot(at(100ms)).queued_tokens, 300'000u);
    auto second = queue.snapshot(at(500ms));  // the second is half done
    EXPECT_EQ(second.prefilling, 1u);
    EXPECT_EQ(second.waiting, 1u);
    EXPECT_EQ(second.queued_tokens, 100'000u);
    auto idle = queue.snapshot(at(1s));
    EXPECT_EQ(idle.prefilling + idle.waiting + idle.queued_tokens, 0u);
}

TEST(PrefillQueue, BudgetSplitsEachStepInArrivalOrder) {
    PrefillQueue queue(1us, 256);
    auto busy = queue.add(256, at(0us));  // the first step, alone: the rank was idle
    auto a = queue.add(100, at(10us));
    auto b = queue.add(300, at(10us));
    EXPECT_EQ(queue.doneAt(busy, at(10us)), at(256us));
    // Step 2: all of a and 156 of b; step 3: b's last 144.
    EXPECT_EQ(queue.doneAt(a, at(10us)), at(512us));
    EXPECT_EQ(queue.doneAt(b, at(10us)), at(656us));
    auto waiting = queue.snapshot(at(10us));
    EXPECT_EQ(waiting.prefilling, 1u);
    EXPECT_EQ(waiting.waiting, 2u);
    auto both = queue.snapshot(at(300us));
    EXPECT_EQ(both.prefilling, 2u);
    EXPECT_EQ(both.waiting, 0u);
    EXPECT_EQ(queue.doneAt(a, at(512us)), std::nullopt);
    EXPECT_EQ(queue.doneAt(b, at(655us)), at(656us));
}

TEST(PrefillQueue, LongPromptIsChunkedAndALaterArrivalSharesItsLastStep) {
    PrefillQueue chunked(1us, 256);
    auto a = chunked.add(1'000, at(0us));
    auto c = chunked.add(10, at(100us));  // joins at the next step, not this one
    EXPECT_EQ(chunked.snapshot(at(100us)).waiting, 1u);
    // Steps end at 256, 512, 768; the fourth takes a's last 232 and c's 10.
    EXPECT_EQ(chunked.doneAt(a, at(100us)), at(1'010us));
    EXPECT_EQ(chunked.doneAt(c, at(100us)), at(1'010us));
    EXPECT_EQ(chunked.snapshot(at(300us)).waiting, 1u);  // steps 2 and 3 are all a's
    EXPECT_EQ(chunked.snapshot(at(800us)).prefilling, 2u);

    PrefillQueue whole(1us, 0);
    auto wa = whole.add(1'000, at(0us));
    auto wc = whole.add(10, at(100us));
    EXPECT_EQ(whole.doneAt(wa, at(100us)), at(1'000us));
    EXPECT_EQ(whole.doneAt(wc, at(100us)), at(1'010us));
}

TEST(PrefillQueue, ArrivalFillingTheLastStepDelaysAnEarlierRequest) {
    PrefillQueue queue(1us, 256);
    auto a = queue.add(300, at(0us));
    EXPECT_EQ(queue.doneAt(a, at(0us)), at(300us));
    auto b = queue.add(1'000, at(10us));
    // a's last 44 tokens share step 2 with 212 of b's.
    EXPECT_EQ(queue.doneAt(a, at(10us)), at(512us));
    EXPECT_EQ(queue.doneAt(b, at(10us)), at(1'300us));
}

TEST(PrefillQueue, WithABudgetALeaverStillCostsItsCurrentStep) {
    PrefillQueue queue(1us, 256);
    int woken = 0;
    auto a = queue.add(1'000, at(0us));
    auto b = queue.add(100, at(0us), [&] { ++woken; });
    EXPECT_EQ(queue.doneAt(b, at(0us)), at(1'100us));
    queue.remove(a, at(100us));
    EXPECT_EQ(woken, 1);
    // The step that started at 0 holds 256 of a's tokens: it ends at 256.
    EXPECT_EQ(queue.doneAt(b, at(100us)), at(356us));
    auto late = queue.add(50, at(150us));
    EXPECT_EQ(queue.doneAt(late, at(150us)), at(406us));
}

TEST(PrefillQueue, LeaverAloneInItsStepKeepsTheRankBusyUntilTheStepEnds) {
    PrefillQueue queue(1us, 256);
    auto a = queue.add(300, at(0us));
    queue.remove(a, at(100us));
    auto b = queue.add(10, at(150us));
    EXPECT_EQ(queue.doneAt(b, at(150us)), at(266us));
    EXPECT_EQ(queue.doneAt(b, at(266us)), std::nullopt);
}

TEST(PrefillQueue, RemovingTwiceOrUnknownIsHarmless) {
    PrefillQueue queue(1us, 0);
    auto a = queue.add(100, at(0us));
    queue.remove(a, at(10us));
    queue.remove(a, at(10us));
    queue.remove(12345, at(10us));
    EXPECT_EQ(queue.doneAt(a, at(10us)), std::nullopt);
    EXPECT_EQ(queue.snapshot(at(10us)).queued_tokens, 0u);
}
