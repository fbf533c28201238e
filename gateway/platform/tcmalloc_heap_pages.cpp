// backHeapWithHugePages() for a dpgate linked with gperftools' tcmalloc
// (gateway/CMakeLists.txt): a SysAllocator in front of tcmalloc's own; and
// returnFreeMemory() through tcmalloc's MallocExtension.
#include "gateway/platform/heap_pages.hpp"

#include <gperftools/malloc_extension.h>
#include <sys/mman.h>

#include <new>

namespace dpgate::gateway {
namespace {

// tcmalloc grows its page heap through one SysAllocator: sbrk, then mmap.
// This one asks it for whole huge pages, aligned, and advises them; tcmalloc
// takes the whole of what it is given (actual_size) into its page heap.
class HugePageSysAllocator final : public SysAllocator {
public:
    explicit HugePageSysAllocator(SysAllocator* system) : system_(system) {}

    void* Alloc(size_t size, size_t* actual_size, size_t alignment) override {
        HugeRegionRequest want = hugeRegionRequest(size, alignment);
        if (want.bytes == 0) return nullptr;
        size_t got = 0;
        void* region = system_->Alloc(want.bytes, &got, want.alignment);
        // Refused (out of address space at that alignment): as before, in small pages.
        if (region == nullptr) return system_->Alloc(size, actual_size, alignment);
        if (got == 0) got = want.bytes;
        // Advice: where the kernel has no huge page to give, the region stays in small pages.
        ::madvise(region, got, MADV_HUGEPAGE);
        if (actual_size) *actual_size = got;
        return region;
    }

private:
    SysAllocator* system_;
};

void releaseTcmallocFreeMemory() { MallocExtension::instance()->ReleaseFreeMemory(); }

// Before main: returnFreeMemory() hands tcmalloc's free pages back, where
// glibc's malloc_trim would find nothing of its own to trim.
[[maybe_unused]] const bool kReleasesThroughTcmalloc = (setReturnFreeMemory(releaseTcmallocFreeMemory), true);

}  // namespace

std::string backHeapWithHugePages() {
    std::string mode = thpMode();
    if (mode.empty() || mode == "never")
        return "heap: 4 KiB pages (the kernel's transparent huge pages are " +
               (mode.empty() ? std::string("absent") : mode) + ")";
    // Once (a second would wrap the first), and never destroyed: tcmalloc
    // may grow its heap until the process ends.
    [[maybe_unused]] static const SysAllocator* installed = [] {
        MallocExtension* tcmalloc = MallocExtension::instance();
        alignas(HugePageSysAllocator) static unsigned char storage[sizeof(HugePageSysAllocator)];
        auto* allocator = new (storage) HugePageSysAllocator(tcmalloc->GetSystemAllocator());
        tcmalloc->SetSystemAllocator(allocator);
        return allocator;
    }();
    return "heap: 2 MiB pages where the kernel has them (transparent huge pages: " + mode + ")";
}

}  // namespace dpgate::gateway
