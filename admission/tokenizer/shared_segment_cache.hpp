#pragma once
// The segment counts every counter of the process shares, behind each
// counter's own SegmentCache. A conversation's next turn comes back on
// whatever connection the client has then: after an idle close it is a new
// one, and the kernel hands new connections to any worker, whose own cache
// never saw the conversation. Without this, that turn counted the whole
// conversation again (a 1M-token one: tens of milliseconds of tokenizing);
// with it, the worker copies the counts it lacks from here.
//
// Striped: kStripes SegmentCaches, each under its own mutex, a segment's
// stripe chosen by its hash, so lookups of different segments rarely meet.
// Bounded like a SegmentCache, in all: each stripe holds at most its share
// of max_bytes. A counter consults it only when its own cache misses, so a
// conversation that stays on one worker never takes these locks.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "admission/tokenizer/fast_hash.hpp"
#include "admission/tokenizer/segment_cache.hpp"

namespace dpgate::admission {

class SharedSegmentCache {
public:
    static constexpr std::size_t kStripes = 64;

    // max_entries as SegmentCache's (0: as many as max_bytes allows), in all.
    explicit SharedSegmentCache(std::size_t max_bytes, std::size_t max_entries = 0);

    std::optional<std::uint64_t> find(std::string_view segment, Hash128 hash);
    void insert(std::string_view segment, Hash128 hash, std::uint64_t tokens);

    // Sums over the stripes, in one pass, each stripe read under its lock.
    struct Stats {
        std::size_t bytes = 0;
        std::uint64_t hits = 0;
        std::uint64_t misses = 0;
    };
    Stats stats() const;
    std::uint64_t hits() const { return stats().hits; }
    std::uint64_t misses() const { return stats().misses; }
    std::size_t memoryBytes() const { return stats().bytes; }
    std::size_t maxBytes() const { return max_bytes_; }

private:
    struct alignas(64) Stripe {
        Stripe(std::size_t max_bytes, std::size_t max_entries) : cache(max_bytes, max_entries) {}
        mutable std::mutex mutex;
        SegmentCache cache;
    };
    Stripe& stripeOf(Hash128 hash) { return *stripes_[hash.hi % kStripes]; }

    std::size_t max_bytes_;
    std::array<std::unique_ptr<Stripe>, kStripes> stripes_;
};

}  // namespace dpgate::admission
