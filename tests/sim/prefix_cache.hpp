#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <unordered_map>

namespace dpgate::sim {

// One DP rank's prefix (KV) cache: a bounded LRU set of chained block hashes.
// Since block i's hash chains blocks 0..i-1, a request's cache hit is the
// longest run of its leading blocks present in the set.
class PrefixCache {
public:
    explicit PrefixCache(std::size_t capacity_blocks) : capacity_blocks_(capacity_blocks) {}

    // Number of leading blocks of `blocks` present.
    std::size_t matchBlocks(std::span<const std::uint64_t> blocks) const;
    // Inserts or touches the blocks. Like vLLM, a request's later blocks are
    // evicted before its earlier ones, so a conversation's head survives
    // longest: blocks are touched from last to first.
    void insert(std::span<const std::uint64_t> blocks);
    void clear();
    std::size_t sizeBlocks() const;

private:
    mutable std::mutex mutex_;
    std::size_t capacity_blocks_;
    std::list<std::uint64_t> lru_;  // front = most recently used
    std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> index_;
};

}  // namespace dpgate::sim
