#pragma once
// Byte-level BPE over token ids: a piece's bytes map to the ids of their
// byte-level characters, then ranked merges apply lowest rank first,
// leftmost first among equal ranks (HuggingFace's BPE::merge_word order).
#include <cstdint>
#include <string_view>
#include <vector>

namespace dpgate::admission {

class BpeModel {
 public:
  struct Merge {
    std::uint32_t left;
    std::uint32_t right;
    std::uint32_t merged;
  };

  // byte_ids[b] is the id of byte b's byte-level character; merges are in
  // rank order (index = rank).
  BpeModel(const std::uint32_t (&byte_ids)[256], const std::vector<Merge>& merges);

  // Appends the ids of one pre-tokenized piece.
  void encodePiece(std::string_view piece, std::vector<std::uint32_t>& ids) const;

  std::size_t memoryBytes() const { return table_.size() * sizeof(std::uint64_t) + merged_by_rank_.size() * 4; }

  // Ids and ranks must be below 2^kIdBits (load checks).
  static constexpr unsigned kIdBits = 21;

 private:
  // One 8-byte slot per merge so the table (2 MB for DeepSeek's 128K merges)
  // is as cache-friendly as it can be: [used:1][left:21][right:21][rank:21].
  // The merged id is looked up by rank, only when a merge happens.
  static constexpr std::uint64_t kIdMask = (1ull << kIdBits) - 1;
  static constexpr std::uint64_t kPairMask = (1ull << (2 * kIdBits)) - 1;
  static constexpr std::uint64_t kUsed = 1ull << 63;
  static constexpr std::uint32_t kNoRank = ~0u;

  static std::uint64_t pairKey(std::uint32_t left, std::uint32_t right) {
    return (static_cast<std::uint64_t>(left) << kIdBits) | right;
  }
  static std::size_t mix(std::uint64_t key) {
    key ^= key >> 29;
    key *= 0x7fb5d329728ea185ull;
    key ^= key >> 32;
    return static_cast<std::size_t>(key);
  }
  // Rank of the merge (left, right), or kNoRank.
  std::uint32_t rankOf(std::uint32_t left, std::uint32_t right) const {
    const std::uint64_t key = pairKey(left, right);
    std::size_t i = mix(key) & mask_;
    for (;;) {
      const std::uint64_t slot = table_[i];
      if (!(slot & kUsed)) return kNoRank;
      if (((slot >> kIdBits) & kPairMask) == key) return static_cast<std::uint32_t>(slot & kIdMask);
      i = (i + 1) & mask_;
    }
  }
  // Same answers as rankOf, through a per-thread memo (see bpe_model.cpp).
  std::uint32_t memoRank(std::uint32_t left, std::uint32_t right) const;

  static constexpr std::size_t kLinearMergeMax = 24;
  void mergeLinear(std::vector<std::uint32_t>& symbols) const;
  void mergeHeap(std::vector<std::uint32_t>& symbols) const;

  std::uint64_t model_id_;  // keys the per-thread pair memo
  std::uint32_t byte_ids_[256];
  std::vector<std::uint64_t> table_;
  std::vector<std::uint32_t> merged_by_rank_;
  std::size_t mask_ = 0;
};

}  // namespace dpgate::admission
