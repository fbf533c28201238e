#include "gateway/platform/string_pool.hpp"

#include <vector>

namespace dpgate::gateway {
namespace {

std::vector<std::string>& threadPool() {
    thread_local std::vector<std::string> pool = [] {
        std::vector<std::string> strings;
        strings.reserve(StringPool::kKeep);
        return strings;
    }();
    return pool;
}

}  // namespace

std::string StringPool::take() {
    std::vector<std::string>& pool = threadPool();
    if (pool.empty()) return {};
    std::string s = std::move(pool.back());
    pool.pop_back();
    return s;
}

void StringPool::give(std::string&& s) noexcept {
    // A string's own inline buffer holds 15 bytes: anything at that capacity
    // was never allocated.
    if (s.capacity() <= std::string().capacity() || s.capacity() > kMaxBytes) return;
    std::vector<std::string>& pool = threadPool();
    if (pool.size() >= kKeep) return;
    s.clear();
    pool.push_back(std::move(s));  // within the reserved capacity: no allocation, no throw
}

}  // namespace dpgate::gateway
