#include "admission/tokenizer/token_counter.hpp"

#include <algorithm>

#include "admission/tokenizer/utf8.hpp"
#include "admission/tokenizer/word_cache.hpp"

namespace dpgate::admission {

std::string invalidUtf8Message(std::size_t offset) {
    return "input is not valid UTF-8 (byte offset " + std::to_string(offset) + ")";
}

namespace {
// Word cache entries that fit in an eighth of the bound (as many as asked for when they do).
std::size_t wordCacheEntries(const TokenCounterLimits& limits) {
    std::size_t entries = limits.word_cache_entries;
    while (entries > 0 && WordCache::bytesFor(entries) > limits.cache_bytes / 8) entries /= 2;
    return entries;
}
}  // namespace

TokenCounter::TokenCounter(std::shared_ptr<const Tokenizer> tokenizer, TokenCounterLimits limits)
    : tokenizer_(std::move(tokenizer)),
      limits_(limits),
      words_(wordCacheEntries(limits)),
      segments_(limits.cache_bytes - std::min(limits.cache_bytes, words_.memoryBytes()), limits.segment_cache_entries) {
}

TokenCount TokenCounter::count(std::string_view text) {
    // UTF-8 is checked per segment, and only for segments the cache does not
    // know: a cached segment was checked when it was first counted, and the
    // next turn of a long conversation should not re-read megabytes of it.
    // Checking every segment is equivalent to checking the whole text, since
    // added tokens are themselves valid UTF-8.
    std::uint64_t total = 0;
    std::size_t bad_offset = kValidUtf8;
    auto checked = [&](std::string_view segment) {
        if (bad_offset != kValidUtf8) return false;
        if (const std::size_t bad = findInvalidUtf8(segment); bad != kValidUtf8) {
            bad_offset = static_cast<std::size_t>(segment.data() - text.data()) + bad;
            return false;
        }
        return true;
    };
    tokenizer_->addedTokens().split(
        text,
        [&](std::string_view segment) {
            if (segment.size() < limits_.min_cached_segment_bytes) {
                if (checked(segment)) total += tokenizer_->countOrdinary(segment, &words_, long_merge_, short_merge_);
                return;
            }
            const Hash128 hash = hash128(segment);
            if (const auto cached = segments_.find(segment, hash)) {
                total += *cached;
                return;
            }
            // Counted (and its UTF-8 checked) by another counter.
            SharedSegmentCache* const shared = limits_.shared_segments.get();
            if (const auto cached = shared ? shared->find(segment, hash) : std::nullopt) {
                segments_.insert(segment, hash, *cached);
                total += *cached;
                return;
            }
            if (!checked(segment)) return;
            const std::uint64_t tokens = tokenizer_->countOrdinary(segment, &words_, long_merge_, short_merge_);
            segments_.insert(segment, hash, tokens);
            if (shared) shared->insert(segment, hash, tokens);
            total += tokens;
        },
        [&](std::uint32_t) { ++total; });
    Tokenizer::releaseScratch();
    if (bad_offset != kValidUtf8) return {false, 0, invalidUtf8Message(bad_offset)};
    return {true, total, {}};
}

std::optional<std::string> TokenCounter::encode(std::string_view text, std::vector<std::uint32_t>& ids) {
    if (const std::size_t bad = findInvalidUtf8(text); bad != kValidUtf8) return invalidUtf8Message(bad);
    tokenizer_->addedTokens().split(
        text,
        [&](std::string_view segment) { tokenizer_->encodeOrdinary(segment, &words_, ids, long_merge_, short_merge_); },
        [&](std::uint32_t id) { ids.push_back(id); });
    Tokenizer::releaseScratch();
    return std::nullopt;
}

}  // namespace dpgate::admission
