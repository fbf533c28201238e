// Forward with retry: one try on the plan's first slot and, while no byte
// has reached the client, one retry on the next choice of the table as it
// is after the failure (on another backend when the failure was the
// backend's own). A connect failure or a 502/503/504 is the backend's; a
// first-byte timeout is not retried (the backend may be working on it).
// Nothing is retried after the first byte: the relay starts only after this.
#pragma once

#include "gateway/backends/router.hpp"
#include "gateway/path/upstream_connector.hpp"

#include <functional>
#include <optional>

namespace dpgate::gateway {

struct Forwarded {
    SlotLease lease;        // the slot of the last try (held, unless nothing was routable)
    UpstreamAnswer answer;  // how the last try went
    uint32_t retries = 0;
};

// Told of each retry: the slot that failed, why, and the slot tried next.
using RetryObserver = std::function<void(const SlotLease& failed, const std::string& why, const SlotLease& next)>;

// `plan` must not be empty. A trusted key's pinned rank applies to the first try only.
awaitable<Forwarded> forwardWithRetry(Router& router, const RoutePlan& first, std::optional<uint32_t> pinned_rank,
                                      UpstreamConnector& upstream, const RetryObserver& on_retry);

}  // namespace dpgate::gateway
