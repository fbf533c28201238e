#include "gateway/backend_registry.hpp"

#include <gtest/gtest.h>

using namespace dpgate;
using namespace dpgate::gateway;

namespace {

conf::Config twoBackends() {
    conf::Config c;
    c.health.fall = 2;
    c.health.rise = 2;
    conf::BackendConfig primary;
    primary.name = "primary";
    primary.role = conf::BackendRole::primary;
    conf::BackendConfig standby;
    standby.name = "standby";
    standby.role = conf::BackendRole::standby;
    c.backends = {primary, standby};
    return c;
}

ProbeResult good(uint64_t window = 1048576) {
    ProbeResult r;
    r.health_ok = true;
    r.models_ok = true;
    r.model_ids = {"ds-v4.1-flash-1017"};
    r.max_model_len = window;
    return r;
}

ProbeResult refused() {
    ProbeResult r;
    r.error = "connect: Connection refused";
    return r;
}

}  // namespace

TEST(BackendRegistry, NothingRoutableBeforeTheFirstProbe) {
    BackendRegistry registry(twoBackends());
    EXPECT_FALSE(registry.anyRoutable());
    EXPECT_FALSE(registry.chooseBackend().has_value());
}

TEST(BackendRegistry, PrimaryFirstThenStandbyAfterFall) {
    BackendRegistry registry(twoBackends());
    registry.recordProbe(0, good());
    registry.recordProbe(1, good());
    EXPECT_EQ(registry.chooseBackend(), 0u);
    registry.recordProbe(0, refused());
    EXPECT_EQ(registry.chooseBackend(), 0u) << "one failure is below fall=2";
    registry.recordProbe(0, refused());
    EXPECT_EQ(registry.chooseBackend(), 1u);
    registry.recordProbe(0, good());
    EXPECT_EQ(registry.chooseBackend(), 1u) << "one success is below rise=2";
    registry.recordProbe(0, good());
    EXPECT_EQ(registry.chooseBackend(), 0u);
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
