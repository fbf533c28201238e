#pragma once
// Bounded cache of token counts per text segment (the text between two added
// tokens), keyed by a 128-bit hash and the length. The rendered prompt of the
// next turn of a conversation repeats every earlier segment byte for byte, so
// only the new segments are tokenized. Two generations approximate LRU: a hit
// in the old generation is promoted; when the new one fills, the old is dropped.
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "admission/tokenizer/fast_hash.hpp"

namespace dpgate::admission {

class SegmentCache {
public:
    explicit SegmentCache(std::size_t max_entries = 1u << 14) : max_entries_(max_entries) {}

    std::optional<std::uint64_t> find(std::string_view segment, Hash128 hash);
    void insert(std::string_view segment, Hash128 hash, std::uint64_t tokens);
    std::size_t size() const { return current_.size() + previous_.size(); }
    std::uint64_t hits() const { return hits_; }
    std::uint64_t misses() const { return misses_; }

private:
    struct Key {
        Hash128 hash;
        std::uint64_t bytes;
        friend bool operator==(const Key&, const Key&) = default;
    };
    struct KeyHash {
        std::size_t operator()(const Key& k) const { return static_cast<std::size_t>(k.hash.lo); }
    };
    using Map = std::unordered_map<Key, std::uint64_t, KeyHash>;

    Map current_;
    Map previous_;
    std::size_t max_entries_;
    std::uint64_t hits_ = 0;
    std::uint64_t misses_ = 0;
};

}  // namespace dpgate::admission
