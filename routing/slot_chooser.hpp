// Maps an affinity key to a (backend, DP rank) slot: rendezvous
// (highest-random-weight) hashing with bounded load. Pure and deterministic:
// the same key, slots and loads give the same answer in every process, and
// while the key's first choice is within the bound the answer depends on the
// key and the slots alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dpgate::routing {

struct Slot {
    size_t backend_index;      // index into the gateway's backend list (for the caller)
    std::string backend_name;  // identity: the slot's hash comes from the name, not the index
    uint32_t rank;             // DP rank, sent as X-data-parallel-rank
};

struct SlotChooserOptions {
    double balance_factor = 1.25;  // conf routing.balance_factor
    // The bound's slack: slack_requests x this request's whole prompt +
    // slack_tokens. Small on purpose: a home with a long prefill queued is
    // overloaded even when the system as a whole is not. The Mooncake replay
    // (tests/bench/replay/RESULTS.md) swept 0-1 request and 0-32k tokens;
    // a whole request of slack let a 60k-token prompt wait 1.2 s at home and
    // missed the p99 goal, no slack at all spills a fresh request whenever
    // its home holds any queue.
    double slack_requests = 0.25;
    double slack_tokens = 2048;
};

// One request as the chooser sees it. Loads and costs are in prompt tokens
// not expected in cache: that is the prefill work a slot still has to do,
// which is what a new request waits behind.
struct RouteRequest {
    uint64_t key = 0;
    std::span<const double> loads;            // per slot: in-flight prompt tokens not expected in cache
    std::span<const double> uncached_tokens;  // per slot: this request's prompt tokens not expected in cache there
    double prompt_tokens = 0;                 // this request's whole prompt (sizes the slack)
};

class SlotChooser {
public:
    SlotChooser(std::vector<Slot> slots, SlotChooserOptions options = {});

    const std::vector<Slot>& slots() const { return slots_; }
    size_t size() const { return slots_.size(); }
    const SlotChooserOptions& options() const { return options_; }

    // A slot's identity, stable across table rebuilds and config order
    // (hash of backend name and rank): what a CacheEstimate remembers.
    uint64_t slotId(size_t slot) const { return slot_ids_[slot]; }
    static uint64_t slotIdOf(const Slot& slot);

    // All slot indexes, best rendezvous score first; ignores load. Removing a
    // slot only moves the keys whose first choice it was: every other slot's
    // score for a key is unchanged.
    std::vector<size_t> rendezvousOrder(uint64_t key) const;

    // The key's preference list: the chosen slot first (see choose()), then
    // the other slots within the bound in rendezvous order, then the
    // over-bound slots in rendezvous order (the gateway retries down the list).
    std::vector<size_t> preference(const RouteRequest& request) const;

    // The slot for this request. The key's first rendezvous choice ("home")
    // whenever its load is within the bound
    //     balance_factor * (sum(loads) + uncached_tokens[home]) / slots
    //       + slack_requests * prompt_tokens + slack_tokens
    // (the mean including this request, plus a small slack so a nearly idle
    // system does not spill). Then the choice depends on the key alone and
    // every replica agrees. A home over the bound is overloaded: the request
    // goes to the slot within the bound where its prefill would finish
    // first, loads[s] + uncached_tokens[s] (ties: rendezvous order), unless
    // home itself would still finish it no later. So a turn whose prefix is
    // cached at home leaves only when the queue it skips outweighs the prefix
    // it has to recompute, and a conversation that spilled goes on to the
    // slot now holding its prefix while home stays overloaded. With
    // balance_factor >= 1 the least-loaded slot is always within the bound.
    // Precondition: size() > 0 and both spans have size() entries.
    size_t choose(const RouteRequest& request) const;

    // The same with no estimate of what is cached: every slot costs the
    // whole prompt (`request_load`), so an overloaded home always spills, to
    // the least-loaded slot within the bound.
    std::vector<size_t> preference(uint64_t key, std::span<const double> loads, double request_load) const;
    size_t choose(uint64_t key, std::span<const double> loads, double request_load) const;

    double loadBound(const RouteRequest& request, size_t home) const;
    double loadBound(std::span<const double> loads, double request_load) const;

    // The rendezvous score of one slot for a key (exposed for tests).
    uint64_t score(uint64_t key, size_t slot) const;

private:
    size_t home(uint64_t key) const;
    bool ahead(uint64_t key, size_t a, size_t b) const;  // a before b in the key's rendezvous order

    std::vector<Slot> slots_;
    std::vector<uint64_t> slot_ids_;
    SlotChooserOptions options_;
};

}  // namespace dpgate::routing
