// Where a request goes, and what it costs there.
//
// The Router owns the three things routing learns from traffic: the queued
// prefill per (backend, rank), the recent prefill work per rank (WorkMeter),
// and what each rank's prefix cache is expected to hold (CacheEstimate). A
// request asks for a plan (its slots in preference order) and then leases
// one slot at a time. The lease charges the slot when it is taken; the
// relay tells it when the prefill is over and what the backend reported, and
// whatever it still holds is given back when it is destroyed. Shared by the
// workers: every member is thread-safe.
#pragma once

#include "gateway/backends/backend_registry.hpp"
#include "gateway/usage/stream_usage.hpp"
#include "routing/cache_estimate.hpp"
#include "routing/work_meter.hpp"

#include <boost/container/small_vector.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dpgate::gateway {

class Router;

// One request's view of the routing table: its slots, best first.
struct RoutePlan {
    LocalRef<const RoutingTable> table;  // null or empty: nothing is routable
    // Indexes into table->chooser.slots(). A first plan holds only the chosen
    // slot (a retry replans); a replan, every slot but the one that failed.
    boost::container::small_vector<size_t, 1> preference;
    uint64_t key = 0;  // the affinity key
    double prompt_tokens = 0;
    // Per slot of the table: the prompt tokens not expected in its cache when
    // the plan was made (what the lease charges; on the stack up to 16 slots).
    boost::container::small_vector<double, 16> uncached;

    bool empty() const { return preference.empty(); }
};

// A request's hold on one (backend, rank). Move-only; released once.
class SlotLease {
public:
    SlotLease() = default;
    SlotLease(SlotLease&& other) noexcept { *this = std::move(other); }
    SlotLease& operator=(SlotLease&& other) noexcept;
    ~SlotLease() { prefillDone(); }

    bool held() const { return router_ != nullptr; }
    size_t backend() const { return backend_; }
    uint32_t rank() const { return rank_; }
    const std::string& backendName() const { return *backend_name_; }

    // The prefill is over (the first body byte of a stream, the answer of
    // anything else): the slot's queued load is given back.
    void prefillDone();
    // What the rank really computed (prompt minus cached tokens) replaces
    // what the lease expected in the work meter.
    void answered(const Usage& usage);
    // The try failed before an answer: load and work charge both taken back.
    void abandon();

private:
    friend class Router;
    Router* router_ = nullptr;  // null once released or abandoned
    const std::string* backend_name_ = nullptr;
    size_t backend_ = 0;
    uint32_t rank_ = 0;
    size_t load_index_ = 0;
    int64_t queued_ = 0;       // load still held; 0 once the prefill is over
    double work_charged_ = 0;  // what the work meter holds for this try
    size_t meter_shard_ = 0;   // the work meter's shard it was charged to
};

class Router {
public:
    Router(BackendRegistry& backends, const conf::Config& config);

    // The request's slots, best first. `key` is its affinity key
    // (routing/affinity_key.hpp), `prompt_tokens` its exact prompt.
    RoutePlan plan(uint64_t key, double prompt_tokens);
    // After `failed` failed: the plan on the table as it is now (a passive
    // failure may have rebuilt it), without the slot that failed.
    RoutePlan replan(const RoutePlan& previous, const SlotLease& failed);

    // Leases the plan's slot `choice`, or the rank `pinned_rank` of that
    // slot's backend (a trusted key's X-data-parallel-rank) when the backend
    // has it. Charges the slot's queued load and work with the prompt
    // tokens not expected in its cache, and records the prompt there.
    SlotLease lease(const RoutePlan& plan, size_t choice, std::optional<uint32_t> pinned_rank = std::nullopt);

    // A connect failure or a 502/503/504 of the leased backend.
    void recordFailure(const SlotLease& lease, const std::string& why) {
        backends_.recordPassiveFailure(lease.backend(), why);
    }

    // For /admin/status.
    int64_t queuedPrefill(size_t backend, uint32_t rank) const {
        return loads_[backends_.loadIndex(backend, rank)].value.load(std::memory_order_relaxed);
    }
    double recentWork(size_t backend, uint32_t rank, std::chrono::steady_clock::time_point now) const {
        return work_meter_.value(backends_.loadIndex(backend, rank), routing::meterSeconds(now));
    }

    // A reloaded config's work window.
    void applyReload(const conf::RoutingConfig& routing);

private:
    friend class SlotLease;
    // `retry`: the plan after a failure, which ignores the key's last slot and
    // orders every slot (the first plan needs only the chosen one).
    RoutePlan planOn(LocalRef<const RoutingTable> table, uint64_t key, double prompt_tokens, bool retry);

    BackendRegistry& backends_;
    // Queued prefill per rank. A cache line each: requests of different
    // conversations on different ranks do not share one.
    struct alignas(64) Load {
        std::atomic<int64_t> value{0};
    };
    std::unique_ptr<Load[]> loads_;
    routing::CacheEstimate cache_estimate_;
    routing::WorkMeter work_meter_;
};

}  // namespace dpgate::gateway
