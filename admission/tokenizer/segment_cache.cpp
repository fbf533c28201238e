#include "admission/tokenizer/segment_cache.hpp"

namespace dpgate::admission {

std::optional<std::uint64_t> SegmentCache::find(std::string_view segment, Hash128 hash) {
    const Key key{hash, segment.size()};
    if (const auto it = current_.find(key); it != current_.end()) {
        ++hits_;
        return it->second;
    }
    if (const auto it = previous_.find(key); it != previous_.end()) {
        ++hits_;
        const std::uint64_t tokens = it->second;
        previous_.erase(it);
        insert(segment, hash, tokens);
        return tokens;
    }
    ++misses_;
    return std::nullopt;
}

void SegmentCache::insert(std::string_view segment, Hash128 hash, std::uint64_t tokens) {
    if (current_.size() >= max_entries_ / 2) {
        previous_ = std::move(current_);
        current_ = Map();
    }
    current_[Key{hash, segment.size()}] = tokens;
}

}  // namespace dpgate::admission
