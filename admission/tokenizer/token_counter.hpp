#pragma once
// The per-thread entry point for counting: validates UTF-8, cuts added
// tokens out of the text, and counts each ordinary segment through a word
// cache and a segment cache. Holds mutable caches: one per thread, never
// shared; behind its segment cache it may consult one the whole process
// shares (SharedSegmentCache). The Tokenizer behind it is shared and
// immutable.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/tokenizer/segment_cache.hpp"
#include "admission/tokenizer/shared_segment_cache.hpp"
#include "admission/tokenizer/tokenizer.hpp"
#include "admission/tokenizer/word_cache.hpp"
#include "common/fast_paths.hpp"

namespace dpgate::admission {

struct TokenCount {
    bool ok = false;
    std::uint64_t tokens = 0;
    std::string error;  // set when !ok
};

struct TokenCounterLimits {
    std::size_t word_cache_entries = 1u << 16;
    // 0: as many as cache_bytes allows; else a cap on entries as well.
    std::size_t segment_cache_entries = 0;
    // Shorter segments are counted directly: hashing them costs about as much.
    // Every request is rendered and counted, and a small request's segments
    // (a system prompt, a short user turn) are tens of bytes that repeat from
    // request to request: caching from 24 bytes up made a repeated two-message
    // request cheaper than counting them every time (callgrind, per admit).
    std::size_t min_cached_segment_bytes = 24;
    // Bound on the word and segment caches together (model.count_cache_bytes,
    // shared by the gateway's workers). The word cache takes at most an eighth,
    // the segment cache the rest.
    std::size_t cache_bytes = std::size_t{256} << 20;
    // Consulted when this counter's own segment cache misses, and given every
    // segment it counts (null: none). Its bytes are not in cache_bytes.
    std::shared_ptr<SharedSegmentCache> shared_segments = nullptr;
};

class TokenCounter {
public:
    explicit TokenCounter(std::shared_ptr<const Tokenizer> tokenizer, TokenCounterLimits limits = {});

    // Tokens of `text` as HuggingFace's encode(text) gives them (added tokens
    // matched in the text, no special tokens added around it).
    TokenCount count(std::string_view text);
    // Same ids as HuggingFace's encode(text).getIds(); nullopt on success,
    // else the error (invalid UTF-8).
    std::optional<std::string> encode(std::string_view text, std::vector<std::uint32_t>& ids);

    // The rank sweep for long pieces (bpe_rank_sweep.cpp); off, they merge
    // through the heap, its plain twin. On unless DPGATE_PLAIN turns
    // bpe_rank_sweep off; tests run both.
    void setRankSweep(bool on) { long_merge_ = on ? BpeModel::LongMerge::kAuto : BpeModel::LongMerge::kHeap; }
    // The linear scan for short pieces (bpe_linear_merge.cpp); off, they
    // merge through the heap too. On unless DPGATE_PLAIN turns
    // bpe_linear_merge off.
    void setLinearMerge(bool on) { short_merge_ = on ? BpeModel::ShortMerge::kLinear : BpeModel::ShortMerge::kHeap; }

    const Tokenizer& tokenizer() const { return *tokenizer_; }
    const SegmentCache& segmentCache() const { return segments_; }
    // The caches' own accounting: never above limits().cache_bytes.
    std::size_t cacheBytes() const { return words_.memoryBytes() + segments_.memoryBytes(); }
    const TokenCounterLimits& limits() const { return limits_; }

private:
    std::shared_ptr<const Tokenizer> tokenizer_;
    TokenCounterLimits limits_;
    WordCache words_;
    SegmentCache segments_;
    BpeModel::LongMerge long_merge_ =
        fastPathOn(FastPath::bpe_rank_sweep) ? BpeModel::LongMerge::kAuto : BpeModel::LongMerge::kHeap;
    BpeModel::ShortMerge short_merge_ =
        fastPathOn(FastPath::bpe_linear_merge) ? BpeModel::ShortMerge::kLinear : BpeModel::ShortMerge::kHeap;
};

// "input is not valid UTF-8 (byte offset N)"; shared by every caller that refuses text.
std::string invalidUtf8Message(std::size_t offset);

}  // namespace dpgate::admission
