#include "routing/cache_estimate.hpp"

#include <algorithm>
#include <bit>
#include <mutex>

#include "routing/hash64.hpp"

namespace dpgate::routing {

CacheEstimate::CacheEstimate(size_t capacity_keys)
    : entries_(std::bit_ceil(std::max(capacity_keys, kSetKeys))), set_mask_(entries_.size() / kSetKeys - 1) {}

const CacheEstimate::Entry* CacheEstimate::find(uint64_t key) const {
    const Entry* set = &entries_[setOf(key) * kSetKeys];
    for (size_t i = 0; i < kSetKeys; ++i)
        if (set[i].stamp != 0 && set[i].key == key) return &set[i];
    return nullptr;
}

CacheEstimate::Entry& CacheEstimate::entryFor(uint64_t key) {
    // A full set forgets the key recorded least recently: forgetting only
    // makes the estimate expect less cached (and the chooser treat the key
    // as new), which is the safe direction. Direct mapping forgot too much:
    // 2,224 conversations in 65,536 entries collide ~38 times, and a
    // forgotten conversation can be placed away from its prefix.
    Entry* set = &entries_[setOf(key) * kSetKeys];
    Entry* victim = &set[0];
    for (size_t i = 0; i < kSetKeys; ++i) {
        if (set[i].stamp != 0 && set[i].key == key) return set[i];
        if (set[i].stamp < victim->stamp) victim = &set[i];
    }
    *victim = Entry{key, 0, {}};
    return *victim;
}

double CacheEstimate::cachedTokens(uint64_t key, uint64_t slot_id, double prompt_tokens) const {
    std::lock_guard lock(stripeOf(key));
    const Entry* e = find(key);
    if (!e) return 0;
    for (const Way& way : e->ways)
        if (way.tokens > 0 && way.slot_id == slot_id) return std::min(way.tokens, prompt_tokens);
    return 0;
}

std::optional<size_t> CacheEstimate::lastSlotOf(const Entry* e, const SlotChooser& chooser) {
    if (!e || e->ways[0].tokens <= 0) return std::nullopt;
    for (size_t s = 0; s < chooser.size(); ++s)
        if (chooser.slotId(s) == e->ways[0].slot_id) return s;
    return std::nullopt;
}

std::optional<size_t> CacheEstimate::uncachedTokens(uint64_t key, const SlotChooser& chooser, double prompt_tokens,
                                                    std::span<double> out) const {
    std::lock_guard lock(stripeOf(key));
    const Entry* e = find(key);
    for (size_t s = 0; s < chooser.size(); ++s) {
        double cached = 0;
        if (e)
            for (const Way& way : e->ways)
                if (way.tokens > 0 && way.slot_id == chooser.slotId(s)) cached = std::min(way.tokens, prompt_tokens);
        out[s] = prompt_tokens - cached;
    }
    return lastSlotOf(e, chooser);
}

std::optional<size_t> CacheEstimate::lastSlot(uint64_t key, const SlotChooser& chooser) const {
    std::lock_guard lock(stripeOf(key));
    return lastSlotOf(find(key), chooser);
}

void CacheEstimate::record(uint64_t key, uint64_t slot_id, double prompt_tokens) {
    std::lock_guard lock(stripeOf(key));
    Entry& e = entryFor(key);
    // Recency only matters within a set (entryFor's victim): a stamp one past
    // the set's newest orders it as a process-wide counter would, without a
    // counter every worker's requests write.
    const Entry* set = &entries_[setOf(key) * kSetKeys];
    uint64_t newest = 0;
    for (size_t i = 0; i < kSetKeys; ++i) newest = std::max(newest, set[i].stamp);
    e.stamp = newest + 1;
    if (e.ways[0].slot_id != slot_id) e.ways[1] = e.ways[0];
    e.ways[0] = {slot_id, prompt_tokens};
}

}  // namespace dpgate::routing
