// The registry every routing test starts from: a primary and a standby of
// 8 ranks each, and a probe they pass.
#pragma once

#include "gateway/backends/backend_registry.hpp"

#include <cstdint>

namespace dpgate::gateway::test {

inline conf::Config twoBackends() {
    conf::Config c;
    c.model.id = "ds-v4.1-flash-1017";
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

inline ProbeResult good(uint64_t window = 1048576) {
    ProbeResult r;
    r.health_ok = true;
    r.models_ok = true;
    r.model_ids = {"ds-v4.1-flash-1017"};
    r.max_model_len = window;
    r.reached = true;
    return r;
}

}  // namespace dpgate::gateway::test
