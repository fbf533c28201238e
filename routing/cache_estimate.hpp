// What the gateway expects each slot's prefix cache to hold of a
// conversation: the prompt of the key's last request sent to that slot (an
// append-only conversation's next prompt starts with it). It turns "prompt
// tokens" into "prompt tokens not expected in cache", the unit the slot
// chooser balances in. An estimate: it does not see evictions (it
// may expect a prefix the rank has since dropped), it forgets a key whose
// table entry another key took (it then expects nothing), and it never
// credits one key with another's prefix, so a system prompt shared by every
// conversation attracts nobody to the slots that served it.
// Per gateway process (not shared between replicas). It also names the slot
// a key last went to, where the chooser keeps it; that differs from the
// key's first choice only after a bound was crossed, so replicas still agree
// on every key while nothing is overloaded. Thread-safe (striped spin locks):
// the gateway's workers share one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "routing/hash64.hpp"
#include "routing/slot_chooser.hpp"
#include "routing/spin_lock.hpp"

namespace dpgate::routing {

class CacheEstimate {
public:
    // Room for `capacity_keys` conversations (rounded up to a power of two,
    // at least 4), 56 bytes each: the default 65,536 keys is 3.5 MiB. Keys
    // live in sets of 4; a full set forgets the key recorded least recently.
    explicit CacheEstimate(size_t capacity_keys = size_t{1} << 16);

    // Prompt tokens of a request of `prompt_tokens` for `key` expected in
    // slot `slot_id`'s cache.
    double cachedTokens(uint64_t key, uint64_t slot_id, double prompt_tokens) const;

    // For every slot of `chooser`: this request's prompt tokens not expected
    // in cache there. `out` has chooser.size() entries. Returns lastSlot()
    // from the same lookup (the chooser wants both).
    std::optional<size_t> uncachedTokens(uint64_t key, const SlotChooser& chooser, double prompt_tokens,
                                         std::span<double> out) const;

    // The index in `chooser` of the slot the key's last request went to, if
    // the key is known and that slot is in the table.
    std::optional<size_t> lastSlot(uint64_t key, const SlotChooser& chooser) const;

    // The request was sent to `slot_id`: its prompt will be cached there.
    // Keeps the key's two most recent slots (the home and the slot it last
    // spilled to).
    void record(uint64_t key, uint64_t slot_id, double prompt_tokens);

private:
    struct Way {
        uint64_t slot_id = 0;
        double tokens = 0;  // 0: nothing known
    };
    struct Entry {
        uint64_t key = 0;
        uint64_t stamp = 0;  // 0: unused; else when it was last recorded, in its set's order
        Way ways[2];
    };
    static constexpr size_t kSetKeys = 4;

    const Entry* find(uint64_t key) const;
    static std::optional<size_t> lastSlotOf(const Entry* e, const SlotChooser& chooser);
    Entry& entryFor(uint64_t key);  // the key's entry, or the one it replaces

    // Entries are guarded in stripes (by table index), so the workers'
    // lookups for different conversations do not queue on one lock.
    static constexpr size_t kStripes = 64;
    size_t setOf(uint64_t key) const { return size_t(mix64(key) & set_mask_); }
    SpinLock& stripeOf(uint64_t key) const { return stripes_[setOf(key) % kStripes].lock; }
    // A cache line each: neighbouring stripes taken by different workers do
    // not bounce one line between them.
    struct alignas(64) Stripe {
        SpinLock lock;
    };
    mutable std::array<Stripe, kStripes> stripes_;
    std::vector<Entry> entries_;  // set s is entries_[s * kSetKeys, (s + 1) * kSetKeys)
    uint64_t set_mask_;
};

}  // namespace dpgate::routing
