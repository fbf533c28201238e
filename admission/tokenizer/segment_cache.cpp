#include "admission/tokenizer/segment_cache.hpp"

#include <algorithm>
#include <limits>

namespace dpgate::admission {

namespace {

// A first table of 32 KB: a short-lived counter (the tokens CLI, a test)
// never allocates the bound.
constexpr std::size_t kFirstSlots = 1024;

// Slot for a hash in a table of n slots (n need not be a power of two, so a
// table can use all of its share of the bound).
inline std::size_t slotOf(std::uint64_t hash, std::size_t n) {
    return static_cast<std::size_t>((static_cast<hash_detail::U128>(hash) * n) >> 64);
}

}  // namespace

SegmentCache::SegmentCache(std::size_t max_bytes, std::size_t max_entries)
    : max_bytes_(max_bytes),
      max_slots_(max_bytes / 2 / kEntryBytes),
      max_entries_per_table_(max_entries == 0 ? std::numeric_limits<std::size_t>::max()
                                              : std::max<std::size_t>(1, max_entries / 2)) {}

const SegmentCache::Entry* SegmentCache::Table::find(Hash128 hash, std::uint64_t bytes) const {
    const std::size_t n = slots.size();
    if (n == 0) return nullptr;
    for (std::size_t i = slotOf(hash.lo, n);;) {
        const Entry& e = slots[i];
        if (e.bytes == 0) return nullptr;
        if (e.lo == hash.lo && e.hi == hash.hi && e.bytes == bytes) return &e;
        if (++i == n) i = 0;
    }
}

void SegmentCache::Table::put(Hash128 hash, std::uint64_t bytes, std::uint64_t tokens) {
    const std::size_t n = slots.size();
    std::size_t i = slotOf(hash.lo, n);
    while (slots[i].bytes != 0) {
        if (++i == n) i = 0;
    }
    slots[i] = Entry{hash.lo, hash.hi, bytes, tokens};
    ++used;
}

std::size_t SegmentCache::loadLimit(std::size_t slots) const {
    // At most 3/4 full, so a probe always reaches an empty slot.
    return std::min(slots / 4 * 3, max_entries_per_table_);
}

std::optional<std::uint64_t> SegmentCache::find(std::string_view segment, Hash128 hash) {
    if (const Entry* e = current_.find(hash, segment.size())) {
        ++hits_;
        return e->tokens;
    }
    if (const Entry* e = previous_.find(hash, segment.size())) {
        ++hits_;
        const std::uint64_t tokens = e->tokens;  // makeRoom() may free previous_
        makeRoom();
        if (current_.used < loadLimit(current_.slots.size())) current_.put(hash, segment.size(), tokens);
        return tokens;
    }
    ++misses_;
    return std::nullopt;
}

void SegmentCache::insert(std::string_view segment, Hash128 hash, std::uint64_t tokens) {
    if (segment.empty() || current_.find(hash, segment.size()) != nullptr) return;
    makeRoom();
    if (current_.used < loadLimit(current_.slots.size())) current_.put(hash, segment.size(), tokens);
}

void SegmentCache::makeRoom() {
    const std::size_t slots = current_.slots.size();
    if (slots != 0 && current_.used < loadLimit(slots)) return;
    // Grow while the bound allows the new table beside both old ones (the
    // rehash holds all three for a moment).
    const std::size_t grown = std::min(slots == 0 ? kFirstSlots : slots * 2, max_slots_);
    if (grown > slots && loadLimit(grown) > current_.used && previous_.slots.size() + slots + grown <= 2 * max_slots_) {
        Table bigger;
        bigger.slots.resize(grown);
        for (const Entry& e : current_.slots) {
            if (e.bytes != 0) bigger.put(Hash128{e.lo, e.hi}, e.bytes, e.tokens);
        }
        current_ = std::move(bigger);
        return;
    }
    if (slots == 0) return;  // a bound too small for any table: the cache stays off
    // Full at its largest size: the previous generation is dropped, this one
    // becomes previous, and a new one of the same size starts empty.
    previous_ = std::move(current_);
    current_ = Table{};
    current_.slots.resize(slots);
    ++rotations_;
}

}  // namespace dpgate::admission
