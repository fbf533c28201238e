// A prefix cache of fixed-size KV blocks with LRU eviction, as one DP rank
// keeps it (vLLM's prefix caching). Blocks are named by Mooncake hash ids,
// which already encode their whole prefix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace dpgate::replay {

class BlockLru {
public:
    explicit BlockLru(size_t capacity_blocks) : capacity_blocks_(capacity_blocks) {}

    // Leading blocks of `ids` present: a prefix cache serves only an unbroken prefix.
    size_t prefixHits(const std::vector<uint64_t>& ids) const {
        size_t hits = 0;
        while (hits < ids.size() && index_.count(ids[hits])) ++hits;
        return hits;
    }

    // Touch the tail first so the head is the most recent: under pressure a
    // conversation loses its tail blocks before its shared head, as vLLM
    // frees a sequence's blocks tail-first.
    void touch(const std::vector<uint64_t>& ids) {
        for (auto it = ids.rbegin(); it != ids.rend(); ++it) touchOne(*it);
    }

    size_t size() const { return index_.size(); }

private:
    void touchOne(uint64_t id) {
        auto found = index_.find(id);
        if (found != index_.end()) {
            order_.splice(order_.begin(), order_, found->second);
            return;
        }
        if (capacity_blocks_ == 0) return;
        if (index_.size() == capacity_blocks_) {
            index_.erase(order_.back());
            order_.pop_back();
        }
        order_.push_front(id);
        index_.emplace(id, order_.begin());
    }

    size_t capacity_blocks_;
    std::list<uint64_t> order_;  // most recent first
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> index_;
};

}  // namespace dpgate::replay
