#pragma once
// A bump allocator for one render: every string, list and dict a template
// builds or a request brings in lives here until reset(). Nothing allocated
// here has a destructor to run, so reset() frees all of it at once.
//
// The limit bounds the work a request can make a template do: a template
// that concatenates in a loop (`ns.text = ns.text + message.content`) makes
// quadratic bytes from linear input. Past the limit, allocate() throws
// ArenaLimitExceeded, which the renderer turns into a refusal.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dpgate::admission::jinja {

struct ArenaLimitExceeded {
    std::size_t limit_bytes;
    const char* what = nullptr;  // the operation whose text would not fit (ensureRoom), or null
};

class Arena {
public:
    explicit Arena(std::size_t block_bytes = 64 * 1024) : block_bytes_(block_bytes) {}
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    // Sizes past kMaxBytes (or the limit) throw ArenaLimitExceeded rather
    // than wrap around in the size arithmetic.
    static constexpr std::size_t kMaxBytes = std::size_t{1} << 36;

    void* allocate(std::size_t bytes, std::size_t align = alignof(std::max_align_t)) {
        std::size_t offset = (used_ + align - 1) & ~(align - 1);
        if (blocks_.empty() || offset > capacity_ || bytes > capacity_ - offset) {
            if (bytes > kMaxBytes) throw ArenaLimitExceeded{limit_bytes_ != 0 ? limit_bytes_ : kMaxBytes};
            grow(bytes, align);
            offset = 0;
        }
        // Every byte counts, within a block too: a block may be much larger
        // than what is left under the limit.
        if (limit_bytes_ != 0 && (handed_out_ + offset > limit_bytes_ || bytes > limit_bytes_ - handed_out_ - offset)) {
            throw ArenaLimitExceeded{limit_bytes_};
        }
        used_ = offset + bytes;
        return blocks_[current_].data.get() + offset;
    }

    template <typename T>
    T* allocateArray(std::size_t count) {
        static_assert(std::is_trivially_destructible_v<T>, "the arena never runs destructors");
        if (count == 0) return nullptr;
        if (count > kMaxBytes / sizeof(T)) throw ArenaLimitExceeded{limit_bytes_ != 0 ? limit_bytes_ : kMaxBytes};
        return static_cast<T*>(allocate(sizeof(T) * count, alignof(T)));
    }

    // Throws ArenaLimitExceeded unless `bytes` more would fit under the
    // limit: for results built outside the arena first (a join, a repr, a
    // padded string), which land in it at the end anyway, so that a
    // template cannot make them arbitrarily large before that. `what`
    // names the operation for the refusal.
    void ensureRoom(std::size_t bytes, const char* what = nullptr) const {
        if (bytes > roomBytes()) throw ArenaLimitExceeded{limit_bytes_ != 0 ? limit_bytes_ : kMaxBytes, what};
    }
    // How many bytes more the limit allows.
    std::size_t roomBytes() const {
        const std::size_t limit = limit_bytes_ != 0 ? limit_bytes_ : kMaxBytes;
        return bytesUsed() < limit ? limit - bytesUsed() : 0;
    }

    template <typename T, typename... Args>
    T* make(Args&&... args) {
        static_assert(std::is_trivially_destructible_v<T>, "the arena never runs destructors");
        return new (allocate(sizeof(T), alignof(T))) T{std::forward<Args>(args)...};
    }

    // A copy of `text` that lives as long as the arena's contents.
    std::string_view copy(std::string_view text) {
        if (text.empty()) return {};
        char* out = static_cast<char*>(allocate(text.size(), 1));
        std::memcpy(out, text.data(), text.size());
        return {out, text.size()};
    }

    // Drops everything allocated; keeps the first blocks up to
    // `keep_bytes` for the next render (a 1M-token conversation needs
    // megabytes each turn; most requests need a few kilobytes).
    void reset(std::size_t keep_bytes = 8u << 20);

    // 0: no limit. Counts every byte handed out since the last reset()
    // (a render sets bytesUsed() + its own budget).
    void setLimit(std::size_t limit_bytes) { limit_bytes_ = limit_bytes; }
    std::size_t bytesUsed() const { return handed_out_ + used_; }

private:
    struct Block {
        std::unique_ptr<char[]> data;
        std::size_t size;
    };
    // Moves to a block with room for `bytes` at its (aligned) start.
    void grow(std::size_t bytes, std::size_t align);

    std::vector<Block> blocks_;
    std::size_t current_ = 0;
    std::size_t used_ = 0;        // bytes used in blocks_[current_]
    std::size_t capacity_ = 0;    // size of blocks_[current_]
    std::size_t handed_out_ = 0;  // bytes of the blocks before current_
    std::size_t block_bytes_;
    std::size_t limit_bytes_ = 0;
};

}  // namespace dpgate::admission::jinja
