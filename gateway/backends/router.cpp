#include "gateway/backends/router.hpp"

#include "gateway/metrics/sharded_count.hpp"
#include "gateway/platform/coarse_clock.hpp"

#include <boost/container/small_vector.hpp>

#include <algorithm>

namespace dpgate::gateway {

namespace {

size_t totalRanks(const conf::Config& config) {
    size_t ranks = 0;
    for (const auto& b : config.backends) ranks += b.dp_ranks;
    return ranks;
}

// The work meter's window is minutes long: a tick's precision is plenty.
double nowSeconds() { return routing::meterSeconds(coarseNow()); }

}  // namespace

SlotLease& SlotLease::operator=(SlotLease&& other) noexcept {
    if (this != &other) {
        prefillDone();
        router_ = std::exchange(other.router_, nullptr);
        backend_name_ = other.backend_name_;
        backend_ = other.backend_;
        rank_ = other.rank_;
        load_index_ = other.load_index_;
        queued_ = std::exchange(other.queued_, 0);
        work_charged_ = std::exchange(other.work_charged_, 0.0);
        meter_shard_ = other.meter_shard_;
    }
    return *this;
}

void SlotLease::prefillDone() {
    if (router_ && queued_ != 0) router_->loads_[load_index_].value.fetch_sub(queued_, std::memory_order_relaxed);
    queued_ = 0;
}

void SlotLease::answered(const Usage& usage) {
    if (!router_) return;
    const double computed = double(usage.prompt_tokens) - double(usage.cached_prompt_tokens);
    if (computed == work_charged_) return;  // the lease expected it right: nothing to correct
    router_->work_meter_.add(load_index_, computed - work_charged_, nowSeconds(), meter_shard_);
    work_charged_ = computed;
}

void SlotLease::abandon() {
    if (!router_) return;
    prefillDone();
    if (work_charged_ != 0) router_->work_meter_.add(load_index_, -work_charged_, nowSeconds(), meter_shard_);
    work_charged_ = 0;
    router_ = nullptr;
}

Router::Router(BackendRegistry& backends, const conf::Config& config)
    : backends_(backends),
      loads_(std::make_unique<Load[]>(totalRanks(config))),
      // A shard per worker thread (metrics::threadShard): every lease adds to
      // the meter, and one lock for all workers would be one more line they bounce.
      work_meter_(totalRanks(config), double(config.routing.work_window_ms) / 1000.0, metrics::kShards) {}

void Router::applyReload(const conf::RoutingConfig& routing) {
    work_meter_.setWindow(double(routing.work_window_ms) / 1000.0);
}

RoutePlan Router::planOn(LocalRef<const RoutingTable> table, uint64_t key, double prompt_tokens, bool retry) {
    RoutePlan plan;
    plan.key = key;
    plan.prompt_tokens = prompt_tokens;
    plan.table = std::move(table);
    if (!plan.table || plan.table->chooser.size() == 0) return plan;
    const RoutingTable& t = *plan.table;
    const size_t n = t.chooser.size();
    // Loads and costs are prompt tokens not expected in a slot's cache. On
    // the stack for up to two machines of 8 ranks (no allocation per request).
    boost::container::small_vector<double, 16> loads(n), work;
    plan.uncached.resize(n);
    for (size_t i = 0; i < n; ++i) loads[i] = double(loads_[t.load_index[i]].value.load(std::memory_order_relaxed));
    std::optional<size_t> last_slot = cache_estimate_.uncachedTokens(key, t.chooser, prompt_tokens, plan.uncached);
    if (retry) last_slot.reset();
    // New conversations avoid ranks that did more than their share of the
    // recent prefill work; known ones stay on the rank that served them last,
    // and need no look at the work meter (a read locks every shard in use).
    if (!last_slot) {
        work.resize(n);
        work_meter_.values(t.load_index, nowSeconds(), work);
    }
    const routing::RouteRequest request{key, loads, plan.uncached, prompt_tokens, work, last_slot};
    if (retry) {
        const std::vector<size_t> order = t.chooser.preference(request);
        plan.preference.assign(order.begin(), order.end());
    } else {
        plan.preference.push_back(t.chooser.choose(request));  // preference()'s first, without ordering the rest
    }
    return plan;
}

RoutePlan Router::plan(uint64_t key, double prompt_tokens) {
    return planOn(backends_.routingTable(), key, prompt_tokens, false);
}

RoutePlan Router::replan(const RoutePlan& previous, const SlotLease& failed) {
    // The failure just rebuilt the routing table (in failover mode the
    // standby's ranks replace the primary's): the retry goes to the key's
    // first choice there, never back to the slot that failed.
    RoutePlan plan = planOn(backends_.routingTable(), previous.key, previous.prompt_tokens, true);
    if (plan.empty()) return plan;
    const auto& slots = plan.table->chooser.slots();
    plan.preference.erase(
        std::remove_if(
            plan.preference.begin(), plan.preference.end(),
            [&](size_t i) { return slots[i].backend_index == failed.backend() && slots[i].rank == failed.rank(); }),
        plan.preference.end());
    return plan;
}

SlotLease Router::lease(const RoutePlan& plan, size_t choice, std::optional<uint32_t> pinned_rank) {
    const routing::Slot& slot = plan.table->chooser.slots()[plan.preference[choice]];
    const conf::BackendConfig& config = backends_.config(slot.backend_index);
    SlotLease lease;
    lease.router_ = this;
    lease.backend_ = slot.backend_index;
    lease.backend_name_ = &config.name;
    lease.rank_ = pinned_rank && *pinned_rank < config.dp_ranks ? *pinned_rank : slot.rank;
    lease.load_index_ = backends_.loadIndex(lease.backend_, lease.rank_);
    const uint64_t slot_id = routing::SlotChooser::slotIdOf(routing::Slot{lease.backend_, config.name, lease.rank_});
    // The plan's figure for its own slot; a pinned rank's is looked up.
    const size_t slot_index = plan.preference[choice];
    const double expected_uncached =
        lease.rank_ == slot.rank && slot_index < plan.uncached.size()
            ? plan.uncached[slot_index]
            : plan.prompt_tokens - cache_estimate_.cachedTokens(plan.key, slot_id, plan.prompt_tokens);
    lease.queued_ = int64_t(expected_uncached);
    loads_[lease.load_index_].value.fetch_add(lease.queued_, std::memory_order_relaxed);
    lease.work_charged_ = expected_uncached;
    lease.meter_shard_ = metrics::threadShard();
    work_meter_.add(lease.load_index_, expected_uncached, nowSeconds(), lease.meter_shard_);
    cache_estimate_.record(plan.key, slot_id, plan.prompt_tokens);
    return lease;
}

}  // namespace dpgate::gateway
