#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dpgate::sim {

// Pseudo-tokenizer and block hasher of a canonical prompt.
//
// Token counting here is approximate by design: the gateway owns exact
// counting (model tokenizer + chat template); the simulator only needs
// numbers that scale with the prompt and a prefix structure that behaves like
// vLLM's prefix cache. So a pseudo-token is a 4-byte unit of the canonical
// prompt text (prompt_tokens = ceil(bytes / 4)), and each image stands for
// 4096 virtual bytes derived from its URL, i.e. exactly 1024 tokens.
//
// Like vLLM, only full blocks are hashed: a block is 16 pseudo-tokens (64
// bytes), and the hash of block i chains the hash of block i-1, so equal
// block hashes mean equal prefixes.
class PromptHasher {
public:
    static constexpr std::size_t kTokenBytes = 4;
    static constexpr std::size_t kBlockTokens = 16;
    static constexpr std::size_t kBlockBytes = kTokenBytes * kBlockTokens;
    static constexpr std::size_t kImageTokens = 1024;

    void feed(std::string_view bytes);
    void feedImage(std::string_view url);

    std::uint64_t promptTokens() const { return (total_bytes_ + kTokenBytes - 1) / kTokenBytes; }
    const std::vector<std::uint64_t>& blockHashes() const { return blocks_; }
    std::vector<std::uint64_t> takeBlockHashes() { return std::move(blocks_); }
    // Hash of the whole prompt including the trailing partial block; seeds the
    // deterministic generated text.
    std::uint64_t digest() const;

private:
    void hashBlock(const char* block);

    char pending_[kBlockBytes] = {};
    std::size_t pending_bytes_ = 0;
    std::uint64_t total_bytes_ = 0;
    std::uint64_t chain_ = 0x6470676174652d73ULL;  // "dpgate-s"
    std::vector<std::uint64_t> blocks_;
};

std::uint64_t mix64(std::uint64_t value);
std::uint64_t hashBytes(std::string_view bytes, std::uint64_t seed);

}  // namespace dpgate::sim
