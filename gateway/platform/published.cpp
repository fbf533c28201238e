#include "gateway/platform/published.hpp"

namespace dpgate::gateway::published_detail {

uint64_t nextGeneration() {
    static std::atomic<uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

ThreadEntries& threadEntries() {
    thread_local ThreadEntries entries;
    return entries;
}

}  // namespace dpgate::gateway::published_detail
