#include "prefix_cache.hpp"

#include <algorithm>

namespace dpgate::sim {

std::size_t PrefixCache::matchBlocks(std::span<const std::uint64_t> blocks) const {
    std::lock_guard lock(mutex_);
    std::size_t matched = 0;
    while (matched < blocks.size() && index_.contains(blocks[matched])) ++matched;
    return matched;
}

void PrefixCache::insert(std::span<const std::uint64_t> blocks) {
    if (capacity_blocks_ == 0) return;
    // Inserting more than the capacity would evict this request's own tail;
    // the end state is the same as inserting only its head.
    blocks = blocks.first(std::min(blocks.size(), capacity_blocks_));
    std::lock_guard lock(mutex_);
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
        auto found = index_.find(*it);
        if (found != index_.end()) {
            lru_.splice(lru_.begin(), lru_, found->second);
            continue;
        }
        lru_.push_front(*it);
        index_.emplace(*it, lru_.begin());
        if (lru_.size() > capacity_blocks_) {
            index_.erase(lru_.back());
            lru_.pop_back();
        }
    }
}

void PrefixCache::clear() {
    std::lock_guard lock(mutex_);
    lru_.clear();
    index_.clear();
}

std::size_t PrefixCache::sizeBlocks() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
}

}  // namespace dpgate::sim
