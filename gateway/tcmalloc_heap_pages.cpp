// backHeapWithHugePages() for a dpgate linked with gperftools' tcmalloc
// (gateway/CMakeLists.txt): a SysAllocator in front of tcmalloc's own.
#include "gateway/heap_pages.hpp"

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
        if (region == nullptr) return system_->Alloc(size, actual_size, alignment);  // as before, in small pages
        ::madvise(region, got, MADV_HUGEPAGE);  // advice: without THP the region stays in small pages
        if (actual_size) *actual_size = got;
        return region;
    }

private:
    SysAllocator* system_;
};

}  // namespace

std::string backHeapWithHugePages() {
    std::string mode = thpMode();
    if (mode.empty() || mode == "never")
        return "heap: 4 KiB pages (the kernel's transparent huge pages are " +
               (mode.empty() ? std::string("absent") : mode) + ")";
    MallocExtension* tcmalloc = MallocExtension::instance();
    // Lives as long as the process; tcmalloc never gives an allocator back.
    alignas(HugePageSysAllocator) static unsigned char storage[sizeof(HugePageSysAllocator)];
    tcmalloc->SetSystemAllocator(new (storage) HugePageSysAllocator(tcmalloc->GetSystemAllocator()));
    return "heap: 2 MiB pages where the kernel has them (transparent huge pages: " + mode + ")";
}

}  // namespace dpgate::gateway
