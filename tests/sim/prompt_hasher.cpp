#include "prompt_hasher.hpp"

#include <algorithm>
#include <cstring>

namespace dpgate::sim {

std::uint64_t mix64(std::uint64_t value) {
    // splitmix64's finalizer: cheap and well distributed.
    value ^= value >> 30;
    value *= 0xbf58476d1ce4e5b9ULL;
    value ^= value >> 27;
    value *= 0x94d049bb133111ebULL;
    value ^= value >> 31;
    return value;
}

std::uint64_t hashBytes(std::string_view bytes, std::uint64_t seed) {
    std::uint64_t hash = mix64(seed ^ bytes.size());
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
        std::uint64_t word;
        std::memcpy(&word, bytes.data() + i, 8);
        hash = mix64(hash ^ word) + 0x9e3779b97f4a7c15ULL;
    }
    if (i < bytes.size()) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes.data() + i, bytes.size() - i);
        hash = mix64(hash ^ word ^ 0xff);
    }
    return hash;
}

void PromptHasher::hashBlock(const char* block) {
    chain_ = hashBytes(std::string_view(block, kBlockBytes), chain_);
    blocks_.push_back(chain_);
}

void PromptHasher::feed(std::string_view bytes) {
    total_bytes_ += bytes.size();
    if (pending_bytes_ > 0) {
        std::size_t take = std::min(bytes.size(), kBlockBytes - pending_bytes_);
        std::memcpy(pending_ + pending_bytes_, bytes.data(), take);
        pending_bytes_ += take;
        bytes.remove_prefix(take);
        if (pending_bytes_ < kBlockBytes) return;
        hashBlock(pending_);
        pending_bytes_ = 0;
    }
    while (bytes.size() >= kBlockBytes) {
        hashBlock(bytes.data());
        bytes.remove_prefix(kBlockBytes);
    }
    std::memcpy(pending_, bytes.data(), bytes.size());
    pending_bytes_ = bytes.size();
}

void PromptHasher::feedImage(std::string_view url) {
    // The virtual bytes repeat the URL's hash, so the same image at the same
    // place yields the same blocks and a different image does not.
    std::uint64_t seed = hashBytes(url, 0x696d616765ULL);
    char image[kImageTokens * kTokenBytes];
    for (std::size_t i = 0; i < sizeof image; i += 8) std::memcpy(image + i, &seed, 8);
    feed(std::string_view(image, sizeof image));
}

std::uint64_t PromptHasher::digest() const {
    return hashBytes(std::string_view(pending_, pending_bytes_), chain_ ^ total_bytes_);
}

}  // namespace dpgate::sim
