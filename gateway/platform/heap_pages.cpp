#include "gateway/platform/heap_pages.hpp"

#include <malloc.h>
#include <fstream>
#include <iterator>
#include <limits>

namespace dpgate::gateway {

namespace {

void trimGlibcHeap() { ::malloc_trim(0); }

// Constant-initialised: set before any dynamic initialiser may replace it.
void (*return_free_memory)() = trimGlibcHeap;

}  // namespace

void returnFreeMemory() { return_free_memory(); }

void setReturnFreeMemory(void (*release)()) { return_free_memory = release; }

HugeRegionRequest hugeRegionRequest(std::size_t bytes, std::size_t alignment) {
    if (bytes > std::numeric_limits<std::size_t>::max() - (kHugePageBytes - 1)) return {0, kHugePageBytes};
    return {(bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1),
            alignment > kHugePageBytes ? alignment : kHugePageBytes};
}

std::string_view thpModeOf(std::string_view sysfs_text) {
    auto open = sysfs_text.find('[');
    if (open == std::string_view::npos) return {};
    auto close = sysfs_text.find(']', open + 1);
    if (close == std::string_view::npos) return {};
    return sysfs_text.substr(open + 1, close - open - 1);
}

std::string thpMode() {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return std::string(thpModeOf(text));
}

}  // namespace dpgate::gateway
