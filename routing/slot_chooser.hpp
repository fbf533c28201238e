// Maps an affinity key to a (backend, DP rank) slot: rendezvous
// (highest-random-weight) hashing with bounded load. Pure and deterministic:
// the same key, slots, loads and recent work give the same answer in every
// process, and while no slot is over either bound (see choose()) the answer
// depends on the key and the slots alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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
    // A new key's home whose recent work is above
    //     work_factor x mean(recent work) + work_slack_tokens
    // is avoided (conf routing.work_balance_factor, work_slack_tokens; 0 = off).
    // The replay swept 1.0-1.1 and 0-128k tokens: 1.0 keeps the slots' work
    // within 1.15 of each other; the slack keeps a nearly idle system on the
    // key's home (every replica agrees there).
    double work_factor = 1.0;
    double work_slack_tokens = 16384;
};

// One request as the chooser sees it. Loads and costs are in prompt tokens
// not expected in cache: that is the prefill work a slot still has to do,
// which is what a new request waits behind.
struct RouteRequest {
    uint64_t key = 0;
    std::span<const double> loads;            // per slot: in-flight prompt tokens not expected in cache
    std::span<const double> uncached_tokens;  // per slot: this request's prompt tokens not expected in cache there
    double prompt_tokens = 0;                 // this request's whole prompt (sizes the slack)
    std::span<const double> work;             // per slot: recent prefill work (WorkMeter); empty = not balanced
    std::optional<size_t> last_slot;          // the slot that served the key's last request, if known
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

    // The slot for this request, in two steps.
    //
    // 1. The anchor: where the key belongs if nothing is overloaded.
    //    - A key that was served before: the slot that served it last, which
    //      holds its prefix (its home, unless it once spilled).
    //    - A new key: its first rendezvous choice ("home"), unless home's
    //      recent work is over the work bound
    //          work_factor * mean(work) + work_slack_tokens
    //      or home is busy (more queued than the in-flight slack below).
    //      Then the slot within the work bound with the least load
    //      (ties: rendezvous order): a new conversation has no prefix to
    //      lose anywhere. A conversation keeps coming back to
    //      where it started, so this is what evens out the slots' work over
    //      minutes, where the in-flight bound below only sees the present.
    // 2. The in-flight bound around the anchor:
    //          balance_factor * (sum(loads) + uncached_tokens[anchor]) / slots
    //            + slack_requests * prompt_tokens + slack_tokens
    //    (the mean including this request, plus a small slack so a nearly
    //    idle system does not spill). An anchor over it is overloaded: the
    //    request goes to the slot within the bound where its prefill would
    //    finish first, loads[s] + uncached_tokens[s] (ties: rendezvous
    //    order), unless the anchor would still finish it no later. So a turn
    //    whose prefix is cached at its anchor leaves only when the queue it
    //    skips outweighs the prefix it has to recompute. With
    //    balance_factor >= 1 the least-loaded slot is always within the bound.
    //
    // While every home is within the work bound and not busy, and no anchor
    // is over the in-flight bound, every key goes to its home and replicas
    // agree; past that, a replica that has not seen a key places it by its
    // own view.
    // Precondition: size() > 0; loads and uncached_tokens have size() entries,
    // work has size() entries or none, last_slot < size().
    size_t choose(const RouteRequest& request) const;

    // The anchor of step 1 (exposed for tests).
    size_t anchor(const RouteRequest& request) const;

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
    // Step 2 of choose(), given the anchor and its in-flight bound.
    size_t chooseAround(const RouteRequest& request, size_t anchor_slot, double bound) const;

    std::vector<Slot> slots_;
    std::vector<uint64_t> slot_ids_;
    SlotChooserOptions options_;
};

}  // namespace dpgate::routing
