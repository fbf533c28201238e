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
