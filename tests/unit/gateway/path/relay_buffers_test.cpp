// A worker's spare relay buffers: reused while the configured size stays,
// retired when a reload changes it (a spare of the old size must never
// serve a relay that fills the new one).
#include "gateway/backends/backend_registry.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/path/path_parts.hpp"

#include <gtest/gtest.h>

namespace dpgate::gateway {
namespace {

struct Parts {
    net::io_context io;
    DeadlineList deadlines;
    conf::Config config;
    BackendRegistry backends{config};
    metrics::GatewayMetrics metrics;
    PathLocal local{io, deadlines, config, backends, metrics, {}, nullptr};
};

TEST(RelayBuffers, ASpareIsReusedAtTheSameSize) {
    Parts p;
    std::unique_ptr<char[]> first = p.local.takeRelayBuffer(2048);
    char* const address = first.get();
    p.local.returnRelayBuffer(std::move(first), 2048);
    EXPECT_EQ(p.local.takeRelayBuffer(2048).get(), address);
}

TEST(RelayBuffers, ANewSizeRetiresTheSparesOfTheOld) {
    Parts p;
    std::unique_ptr<char[]> small = p.local.takeRelayBuffer(2048);
    std::unique_ptr<char[]> held = p.local.takeRelayBuffer(2048);
    char* const small_address = small.get();
    p.local.returnRelayBuffer(std::move(small), 2048);
    // The size grew (a reload): the 2 KiB spare is not handed out.
    std::unique_ptr<char[]> large = p.local.takeRelayBuffer(1 << 20);
    EXPECT_NE(large.get(), small_address);
    large[(1 << 20) - 1] = 'x';  // the whole of it is ours (ASan checks)
    // One taken before the reload comes back at its old size: not kept.
    p.local.returnRelayBuffer(std::move(held), 2048);
    char* const large_address = large.get();
    p.local.returnRelayBuffer(std::move(large), 1 << 20);
    EXPECT_EQ(p.local.takeRelayBuffer(1 << 20).get(), large_address);
    EXPECT_NE(p.local.takeRelayBuffer(1 << 20).get(), nullptr);
}

}  // namespace
}  // namespace dpgate::gateway
