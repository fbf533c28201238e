#include "gateway/backends/backend_registry.hpp"

#include "two_backends.hpp"

#include <gtest/gtest.h>

using namespace dpgate;
using namespace dpgate::gateway;
using test::good;
using test::twoBackends;

namespace {

// The backend whose ranks requests go to now (failover: one backend's slots).
std::optional<size_t> poolBackend(const BackendRegistry& registry) {
    auto table = registry.routingTable();
    if (!table || table->chooser.size() == 0) return std::nullopt;
    for (const auto& slot : table->chooser.slots())
        EXPECT_EQ(slot.backend_index, table->chooser.slots()[0].backend_index) << "failover mixes backends";
    return table->chooser.slots()[0].backend_index;
}

ProbeResult refused() {
    ProbeResult r;
    r.error = "connect: Connection refused";
    return r;
}

// A backend that listens and answers, but not healthy.
ProbeResult unhealthy() {
    ProbeResult r;
    r.reached = true;
    r.error = "GET /health answered 503";
    return r;
}

}  // namespace

TEST(BackendRegistry, NothingRoutableBeforeTheFirstProbe) {
    BackendRegistry registry(twoBackends());
    EXPECT_FALSE(registry.anyRoutable());
    EXPECT_FALSE(poolBackend(registry).has_value());
}

TEST(BackendRegistry, PrimaryFirstThenStandbyAfterFall) {
    BackendRegistry registry(twoBackends());
    registry.recordProbe(0, good());
    registry.recordProbe(1, good());
    EXPECT_EQ(poolBackend(registry), 0u);
    registry.recordProbe(0, refused());
    EXPECT_EQ(poolBackend(registry), 0u) << "one failure is below fall=2";
    registry.recordProbe(0, refused());
    EXPECT_EQ(poolBackend(registry), 1u);
    registry.recordProbe(0, good());
    EXPECT_EQ(poolBackend(registry), 1u) << "one success is below rise=2";
    registry.recordProbe(0, good());
    EXPECT_EQ(poolBackend(registry), 0u);
}

// At start-up both backends are probed at once; when the standby's answer
// lands first, the primary is not down, only not probed yet: no failover,
// and no unaccepted-failover alarm.
TEST(BackendRegistry, StandbyProbedFirstWaitsForThePrimarysFirstVerdict) {
    BackendRegistry registry(twoBackends());
    registry.recordProbe(1, good());
    EXPECT_FALSE(poolBackend(registry).has_value()) << "the standby took traffic before the primary was probed";
    EXPECT_FALSE(registry.unacceptedFailover().has_value());
    EXPECT_FALSE(registry.snapshot()[0].probed);
    EXPECT_TRUE(registry.snapshot()[1].probed);
    registry.recordProbe(0, good());
    EXPECT_EQ(poolBackend(registry), 0u);
    EXPECT_FALSE(registry.unacceptedFailover().has_value());
    EXPECT_TRUE(registry.snapshot()[0].probed);
}

TEST(BackendRegistry, PrimaryFoundDownAtStartFailsOverLoudly) {
    BackendRegistry registry(twoBackends());
    registry.recordProbe(1, good());
    registry.recordProbe(0, unhealthy());  // its first verdict: down at once
    EXPECT_EQ(poolBackend(registry), 1u);
    ASSERT_TRUE(registry.unacceptedFailover().has_value());
    EXPECT_EQ(registry.unacceptedFailover()->backends, "standby");
    EXPECT_TRUE(registry.snapshot()[0].probed);
    EXPECT_FALSE(registry.snapshot()[0].healthy);
}

TEST(BackendRegistry, HealthIsUnknownUntilTheFirstVerdict) {
    BackendRegistry registry(twoBackends());
    for (const BackendView& b : registry.snapshot()) {
        EXPECT_EQ(b.health, BackendHealth::unknown) << b.name;
        EXPECT_FALSE(b.healthy);
        EXPECT_FALSE(b.probed);
    }
    EXPECT_EQ(registry.health(0), BackendHealth::unknown);
    registry.recordProbe(0, good());
    registry.recordProbe(1, unhealthy());
    EXPECT_EQ(registry.health(0), BackendHealth::healthy);
    EXPECT_EQ(registry.health(1), BackendHealth::down);
    EXPECT_EQ(registry.snapshot()[0].health, BackendHealth::healthy);
    EXPECT_EQ(registry.snapshot()[1].health, BackendHealth::down);
    EXPECT_STREQ(toString(BackendHealth::unknown), "unknown");
    EXPECT_STREQ(toString(BackendHealth::healthy), "healthy");
    EXPECT_STREQ(toString(BackendHealth::down), "down");
}

// The gateway started before its backends: nothing listens yet. That is no
// verdict: both stay unknown, nothing fails over, nothing alarms, and the
// first answer decides.
TEST(BackendRegistry, ABackendNotListeningYetStaysUnknown) {
    BackendRegistry registry(twoBackends());
    registry.recordProbe(0, refused());
    registry.recordProbe(1, refused());
    EXPECT_EQ(registry.health(0), BackendHealth::unknown);
    EXPECT_EQ(registry.health(1), BackendHealth::unknown);
    EXPECT_EQ(registry.snapshot()[0].last_error, "connect: Connection refused");
    // The standby comes up first: the unknown primary is not down, so no failover.
    registry.recordProbe(1, good());
    EXPECT_FALSE(poolBackend(registry).has_value());
    EXPECT_FALSE(registry.unacceptedFailover().has_value());
    registry.recordProbe(0, good());
    EXPECT_EQ(registry.health(0), BackendHealth::healthy);
    EXPECT_EQ(poolBackend(registry), 0u);
    EXPECT_FALSE(registry.unacceptedFailover().has_value());
}

// One that never comes up is down after `fall` (2) refusals, as an up one
// would be, and then the failover is loud.
TEST(BackendRegistry, ABackendThatNeverListensIsDownAfterFall) {
    BackendRegistry registry(twoBackends());
    registry.recordProbe(1, good());
    registry.recordProbe(0, refused());
    EXPECT_EQ(registry.health(0), BackendHealth::unknown);
    EXPECT_FALSE(registry.unacceptedFailover().has_value());
    registry.recordProbe(0, refused());
    EXPECT_EQ(registry.health(0), BackendHealth::down);
    EXPECT_EQ(poolBackend(registry), 1u);
    ASSERT_TRUE(registry.unacceptedFailover().has_value());
    EXPECT_EQ(registry.unacceptedFailover()->backends, "standby");
}

// Passive evidence before any probe does not make a verdict either.
TEST(BackendRegistry, APassiveFailureLeavesAnUnknownBackendUnknown) {
    BackendRegistry registry(twoBackends());
    registry.recordPassiveFailure(0, "connect: Connection refused");
    EXPECT_EQ(registry.health(0), BackendHealth::unknown);
    registry.recordProbe(0, good());
    EXPECT_EQ(registry.health(0), BackendHealth::healthy);
    EXPECT_TRUE(registry.routable(0));
}

TEST(BackendRegistry, PublicWindowIsTheSmallestReported) {
    BackendRegistry registry(twoBackends());
    EXPECT_EQ(registry.publicWindow(), 1048576u);
    registry.recordProbe(0, good(1048576));
    registry.recordProbe(1, good(524288));
    EXPECT_EQ(registry.publicWindow(), 524288u);
    // A backend that later stops answering keeps its last report.
    registry.recordProbe(1, refused());
    EXPECT_EQ(registry.publicWindow(), 524288u);
    // Never above the configured window.
    registry.recordProbe(1, good(2 * 1048576));
    EXPECT_EQ(registry.publicWindow(), 1048576u);
}

TEST(BackendRegistry, WrongModelIsAFailedProbe) {
    BackendRegistry registry(twoBackends());
    ProbeResult other = good();
    other.model_ids = {"some-other-model"};
    registry.recordProbe(0, other);
    EXPECT_FALSE(registry.routable(0));
    EXPECT_NE(registry.snapshot()[0].last_error.find("does not list model ds-v4.1-flash-1017"), std::string::npos);
}

TEST(BackendRegistry, FailoverTableHoldsThePrimarysEightRanks) {
    BackendRegistry registry(twoBackends());
    registry.recordProbe(0, good());
    registry.recordProbe(1, good());
    auto table = registry.routingTable();
    ASSERT_EQ(table->chooser.size(), 8u);
    for (uint32_t r = 0; r < 8; ++r) {
        EXPECT_EQ(table->chooser.slots()[r].rank, r);
        EXPECT_EQ(table->load_index[r], registry.loadIndex(0, r));
    }
}

TEST(BackendRegistry, ActiveActiveTableHoldsEveryRoutableBackend) {
    conf::Config config = twoBackends();
    config.routing.mode = conf::RoutingMode::active_active;
    BackendRegistry registry(config);
    registry.recordProbe(0, good());
    registry.recordProbe(1, good());
    EXPECT_EQ(registry.routingTable()->chooser.size(), 16u);
    registry.recordProbe(1, refused());
    registry.recordProbe(1, refused());
    EXPECT_EQ(registry.routingTable()->chooser.size(), 8u);
}

TEST(BackendRegistry, PassiveFailureHoldsTheBackendOutUntilAProbePasses) {
    BackendRegistry registry(twoBackends());
    registry.recordProbe(0, good());
    registry.recordProbe(1, good());
    registry.recordPassiveFailure(0, "connect: Connection refused");
    EXPECT_EQ(poolBackend(registry), 1u);
    EXPECT_EQ(registry.snapshot()[0].last_error, "connect: Connection refused");
    registry.recordProbe(0, good());
    EXPECT_EQ(poolBackend(registry), 0u);
}
