#include "routing/health_state.hpp"

#include <gtest/gtest.h>

using dpgate::routing::HealthState;

TEST(HealthState, FirstProbeDecides) {
    HealthState up(3, 2);
    EXPECT_EQ(up.status(), HealthState::Status::unknown);
    up.probeSucceeded();
    EXPECT_TRUE(up.up());
    HealthState down(3, 2);
    down.probeFailed();
    EXPECT_EQ(down.status(), HealthState::Status::down);
}

// Nobody could connect: the backend may still be starting. It stays
// unknown for up to `fall` such probes; an answer (or a success) decides.
TEST(HealthState, UnreachedProbesLeaveItUnknownUpToFall) {
    HealthState late(3, 2);
    late.probeFailed(/*reached=*/false);
    late.probeFailed(/*reached=*/false);
    EXPECT_EQ(late.status(), HealthState::Status::unknown);
    EXPECT_FALSE(late.probed());
    late.probeSucceeded();
    EXPECT_TRUE(late.up()) << "the first success decides, rise or not";

    HealthState never(3, 2);
    for (int i = 0; i < 2; ++i) never.probeFailed(/*reached=*/false);
    never.probeFailed(/*reached=*/false);
    EXPECT_EQ(never.status(), HealthState::Status::down);

    HealthState answered(3, 2);
    answered.probeFailed(/*reached=*/false);
    answered.probeFailed(/*reached=*/true);
    EXPECT_EQ(answered.status(), HealthState::Status::down) << "an answered failure is a verdict";

    HealthState single(1, 1);
    single.probeFailed(/*reached=*/false);
    EXPECT_EQ(single.status(), HealthState::Status::down) << "fall 1 gives no grace";
}

TEST(HealthState, FallAndRiseNeedConsecutiveProbes) {
    HealthState h(3, 2);
    h.probeSucceeded();
    h.probeFailed();
    h.probeFailed();
    EXPECT_TRUE(h.up());
    h.probeSucceeded();  // resets the failure run
    h.probeFailed();
    h.probeFailed();
    EXPECT_TRUE(h.up());
    h.probeFailed();
    EXPECT_FALSE(h.up());
    h.probeSucceeded();
    EXPECT_FALSE(h.up());
    h.probeFailed();
    h.probeSucceeded();
    EXPECT_FALSE(h.up());
    h.probeSucceeded();
    EXPECT_TRUE(h.up());
}
