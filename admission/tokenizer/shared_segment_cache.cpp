#include "admission/tokenizer/shared_segment_cache.hpp"

namespace dpgate::admission {

SharedSegmentCache::SharedSegmentCache(std::size_t max_bytes, std::size_t max_entries) : max_bytes_(max_bytes) {
    // A cap on entries is spread like the bytes, at least one per stripe.
    const std::size_t entries = max_entries == 0 ? 0 : (max_entries + kStripes - 1) / kStripes;
    for (auto& stripe : stripes_) stripe = std::make_unique<Stripe>(max_bytes / kStripes, entries);
}

std::optional<std::uint64_t> SharedSegmentCache::find(std::string_view segment, Hash128 hash) {
    Stripe& stripe = stripeOf(hash);
    const std::lock_guard lock(stripe.mutex);
    return stripe.cache.find(segment, hash);
}

void SharedSegmentCache::insert(std::string_view segment, Hash128 hash, std::uint64_t tokens) {
    Stripe& stripe = stripeOf(hash);
    const std::lock_guard lock(stripe.mutex);
    stripe.cache.insert(segment, hash, tokens);
}

SharedSegmentCache::Stats SharedSegmentCache::stats() const {
    Stats total;
    for (const auto& stripe : stripes_) {
        const std::lock_guard lock(stripe->mutex);
        total.bytes += stripe->cache.memoryBytes();
        total.hits += stripe->cache.hits();
        total.misses += stripe->cache.misses();
    }
    return total;
}

}  // namespace dpgate::admission
