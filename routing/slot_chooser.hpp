// Maps an affinity key to a (backend, DP rank) slot: rendezvous
// (highest-random-weight) hashing with bounded load. Pure and deterministic:
// the same key, slots and loads give the same answer in every process.
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
    double slack_requests = 1.0;   // the bound's slack, in units of this request's load
};

class SlotChooser {
public:
    SlotChooser(std::vector<Slot> slots, SlotChooserOptions options = {});

    const std::vector<Slot>& slots() const { return slots_; }
    size_t size() const { return slots_.size(); }

    // All slot indexes, best rendezvous score first; ignores load. Removing a
    // slot only moves the keys whose first choice it was: every other slot's
    // score for a key is unchanged.
    std::vector<size_t> rendezvousOrder(uint64_t key) const;

    // The key's preference list under bounded load: slots within the bound,
    // in rendezvous order, then the over-bound slots in rendezvous order (the
    // gateway retries down the list). `loads[i]` is slot i's in-flight prompt
    // tokens not expected in cache; `request_load` is this request's. A slot
    // is over the bound when its load before this request exceeds
    //     balance_factor * (sum(loads) + request_load) / slots
    //       + slack_requests * request_load
    // (the mean including this request, plus one request of slack): a nearly
    // idle system never spills (a slot may always hold one request beyond its
    // share), a hot slot sheds its extra keys to their second choice, which
    // is the same slot for the same key in every replica. With
    // balance_factor >= 1 the least-loaded slot is always within the bound.
    std::vector<size_t> preference(uint64_t key, std::span<const double> loads, double request_load) const;

    // preference(...).front(), without building the list. Precondition: size() > 0.
    size_t choose(uint64_t key, std::span<const double> loads, double request_load) const;

    double loadBound(std::span<const double> loads, double request_load) const;

    // The rendezvous score of one slot for a key (exposed for tests).
    uint64_t score(uint64_t key, size_t slot) const;

private:
    std::vector<Slot> slots_;
    std::vector<uint64_t> slot_ids_;
    SlotChooserOptions options_;
};

}  // namespace dpgate::routing
