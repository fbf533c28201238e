#include "admission/tokenizer/word_cache.hpp"

#include <cstring>

namespace dpgate::admission {

namespace {

std::size_t slotCount(std::size_t max_entries) {
    std::size_t capacity = 16;
    while (capacity < max_entries * 2) capacity <<= 1;
    return capacity;
}
}  // namespace

std::size_t WordCache::bytesFor(std::size_t max_entries) {
    return slotCount(max_entries) * sizeof(Slot) + max_entries * kArenaBytesPerEntry +
           max_entries * kArenaIdsPerEntry * sizeof(std::uint32_t);
}

WordCache::WordCache(std::size_t max_entries)
    : max_entries_(max_entries),
      max_arena_bytes_(max_entries * kArenaBytesPerEntry),
      max_arena_ids_(max_entries * kArenaIdsPerEntry) {
    const std::size_t capacity = slotCount(max_entries);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    bytes_.reserve(max_arena_bytes_);
    ids_.reserve(max_arena_ids_);
}

const std::uint32_t* WordCache::find(std::string_view piece, const Key& key, std::uint32_t& count) const {
    std::size_t i = key.hash & mask_;
    for (;;) {
        const Slot& slot = slots_[i];
        if (slot.bytes_len == 0) return nullptr;
        if (slot.key0 == key.word0 && slot.key1 == key.word1 && slot.bytes_len == piece.size() &&
            (piece.size() <= kInlineBytes || std::memcmp(bytes_.data() + slot.bytes_offset, piece.data() + kInlineBytes,
                                                         piece.size() - kInlineBytes) == 0)) {
            count = slot.ids_len;
            return ids_.data() + slot.ids_offset;
        }
        i = (i + 1) & mask_;
    }
}

void WordCache::insert(std::string_view piece, const Key& key, const std::uint32_t* ids, std::uint32_t count) {
    if (piece.empty() || piece.size() > kMaxPieceBytes) return;
    // Full: start over. Cheaper than LRU bookkeeping on the hot path, and the
    // working set of a text is refilled within a few kilobytes.
    const std::size_t tail = piece.size() > kInlineBytes ? piece.size() - kInlineBytes : 0;
    const auto fits = [&] {
        return size_ < max_entries_ && bytes_.size() + tail <= max_arena_bytes_ &&
               ids_.size() + count <= max_arena_ids_;
    };
    if (!fits()) {
        clear();
        if (!fits()) return;
    }
    std::size_t i = key.hash & mask_;
    while (slots_[i].bytes_len != 0) i = (i + 1) & mask_;
    Slot& slot = slots_[i];
    slot.key0 = key.word0;
    slot.key1 = key.word1;
    slot.bytes_offset = static_cast<std::uint32_t>(bytes_.size());
    slot.bytes_len = static_cast<std::uint16_t>(piece.size());
    slot.ids_offset = static_cast<std::uint32_t>(ids_.size());
    slot.ids_len = static_cast<std::uint16_t>(count);
    bytes_.insert(bytes_.end(), piece.begin() + static_cast<std::ptrdiff_t>(piece.size() - tail), piece.end());
    ids_.insert(ids_.end(), ids, ids + count);
    ++size_;
}

void WordCache::clear() {
    for (Slot& slot : slots_) slot = Slot{};
    bytes_.clear();
    ids_.clear();
    size_ = 0;
}

}  // namespace dpgate::admission
