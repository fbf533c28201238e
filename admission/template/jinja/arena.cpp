#include "admission/template/jinja/arena.hpp"

#include <algorithm>

namespace dpgate::admission::jinja {

void Arena::grow(std::size_t bytes, std::size_t align) {
    const std::size_t before = blocks_.empty() ? 0 : handed_out_ + used_;
    if (limit_bytes_ != 0 && (before > limit_bytes_ || bytes > limit_bytes_ - before)) {
        throw ArenaLimitExceeded{limit_bytes_};
    }
    handed_out_ = before;
    const std::size_t at_least = std::max(bytes, align);  // new[] aligns the start to max_align_t
    const std::size_t next = blocks_.empty() ? 0 : current_ + 1;
    if (next >= blocks_.size() || blocks_[next].size < at_least) {
        const std::size_t size = std::max(at_least, std::max(block_bytes_, capacity_ * 2));
        // Not zeroed: pages the render never writes stay out of memory.
        blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(next),
                       Block{std::unique_ptr<char[]>(new char[size]), size});
    }
    current_ = next;
    capacity_ = blocks_[current_].size;
    used_ = 0;
}

void Arena::reset(std::size_t keep_bytes) {
    std::size_t kept = 0;
    std::size_t count = 0;
    while (count < blocks_.size() && kept + blocks_[count].size <= keep_bytes) kept += blocks_[count++].size;
    blocks_.resize(count);
    current_ = 0;
    used_ = 0;
    handed_out_ = 0;
    capacity_ = blocks_.empty() ? 0 : blocks_[0].size;
}

}  // namespace dpgate::admission::jinja
