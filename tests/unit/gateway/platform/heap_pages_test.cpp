#include "gateway/platform/heap_pages.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace dpgate::gateway {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// This process's resident memory (VmRSS), in KiB.
std::size_t residentKiB() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
    return 0;
}

TEST(HeapPages, AsksForWholeAlignedHugePages) {
    // tcmalloc grows its heap by a megabyte or more, page-aligned.
    EXPECT_EQ(hugeRegionRequest(1 * kMiB, 8192), (HugeRegionRequest{2 * kMiB, 2 * kMiB}));
    EXPECT_EQ(hugeRegionRequest(1, 1), (HugeRegionRequest{2 * kMiB, 2 * kMiB}));
    EXPECT_EQ(hugeRegionRequest(2 * kMiB, 4096), (HugeRegionRequest{2 * kMiB, 2 * kMiB}));
    EXPECT_EQ(hugeRegionRequest(2 * kMiB + 1, 4096), (HugeRegionRequest{4 * kMiB, 2 * kMiB}));
    EXPECT_EQ(hugeRegionRequest(100 * kMiB + 4096, 4096), (HugeRegionRequest{102 * kMiB, 2 * kMiB}));
    // A larger alignment than a huge page is kept.
    EXPECT_EQ(hugeRegionRequest(3 * kMiB, 8 * kMiB), (HugeRegionRequest{4 * kMiB, 8 * kMiB}));
}

TEST(HeapPages, ASizeThatWouldWrapIsRefused) {
    const std::size_t max = std::numeric_limits<std::size_t>::max();
    EXPECT_EQ(hugeRegionRequest(max, 4096).bytes, 0u);
    EXPECT_EQ(hugeRegionRequest(max - kHugePageBytes + 2, 4096).bytes, 0u);
    // The largest that rounds without wrapping.
    const std::size_t last = max - (kHugePageBytes - 1);
    EXPECT_EQ(hugeRegionRequest(last, 4096).bytes, last & ~(kHugePageBytes - 1));
    EXPECT_EQ(hugeRegionRequest(last, 4096).bytes % kHugePageBytes, 0u);
}

TEST(HeapPages, ReadsTheKernelsMode) {
    EXPECT_EQ(thpModeOf("always [madvise] never\n"), "madvise");
    EXPECT_EQ(thpModeOf("[always] madvise never\n"), "always");
    EXPECT_EQ(thpModeOf("always madvise [never]\n"), "never");
    EXPECT_EQ(thpModeOf(""), "");
    EXPECT_EQ(thpModeOf("always madvise never\n"), "");
    EXPECT_EQ(thpModeOf("[always"), "");
    // The running kernel's mode is one of the three, or none at all.
    const std::string mode = thpMode();
    EXPECT_TRUE(mode.empty() || mode == "always" || mode == "madvise" || mode == "never") << mode;
}

TEST(HeapPages, FreedMemoryGoesBackToTheSystem) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "the sanitizer's allocator keeps freed memory on purpose";
#endif
    // The unit tests run on glibc's malloc: blocks under its mmap threshold
    // come from the heap, and freed below a block still in use they stay
    // resident until trimmed.
    constexpr std::size_t kBlockBytes = 64 * 1024, kBlocks = 2048;  // 128 MiB
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < kBlocks; ++i) {
        blocks.push_back(std::malloc(kBlockBytes));
        std::memset(blocks.back(), 1, kBlockBytes);
    }
    void* pin = std::malloc(64);
    for (void* block : blocks) std::free(block);
    const std::size_t before_kib = residentKiB();
    returnFreeMemory();
    const std::size_t after_kib = residentKiB();
    std::free(pin);
    EXPECT_LT(after_kib + 64 * 1024, before_kib)
        << "freed 128 MiB: " << before_kib << " KiB resident, then " << after_kib << " KiB";
}

}  // namespace
}  // namespace dpgate::gateway
