#include "admission/tokenizer/word_cache.hpp"

#include <cstring>

namespace dpgate::admission {

namespace {
struct KeyWords {
    std::uint64_t a;
    std::uint64_t b;
};
inline std::uint64_t load64(const unsigned char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline std::uint64_t load32(const unsigned char* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
// Two words that, with the length, determine a piece of up to 16 bytes
// (overlapping loads cover every byte) and the first 16 bytes of a longer one.
inline KeyWords keyWords(std::string_view piece) {
    const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
    const std::size_t n = piece.size();
    if (n >= 16) return {load64(p), load64(p + 8)};
    if (n >= 8) return {load64(p), load64(p + n - 8)};
    if (n >= 4) return {load32(p) | (load32(p + n - 4) << 32), 0};
    return {static_cast<std::uint64_t>(p[0]) | (static_cast<std::uint64_t>(p[n / 2]) << 8) |
                (static_cast<std::uint64_t>(p[n - 1]) << 16),
            0};
}
constexpr std::size_t kInlineBytes = 16;

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

const std::uint32_t* WordCache::find(std::string_view piece, std::uint64_t hash, std::uint32_t& count) const {
    const KeyWords key = keyWords(piece);
    std::size_t i = hash & mask_;
    for (;;) {
        const Slot& slot = slots_[i];
        if (slot.bytes_len == 0) return nullptr;
        if (slot.key0 == key.a && slot.key1 == key.b && slot.bytes_len == piece.size() &&
            (piece.size() <= kInlineBytes || std::memcmp(bytes_.data() + slot.bytes_offset, piece.data() + kInlineBytes,
                                                         piece.size() - kInlineBytes) == 0)) {
            count = slot.ids_len;
            return ids_.data() + slot.ids_offset;
        }
        i = (i + 1) & mask_;
    }
}

void WordCache::insert(std::string_view piece, std::uint64_t hash, const std::uint32_t* ids, std::uint32_t count) {
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
    std::size_t i = hash & mask_;
    while (slots_[i].bytes_len != 0) i = (i + 1) & mask_;
    Slot& slot = slots_[i];
    const KeyWords key = keyWords(piece);
    slot.key0 = key.a;
    slot.key1 = key.b;
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
