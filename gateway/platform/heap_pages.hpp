// The heap in 2 MiB pages: what the process allocator asks of the kernel.
//
// With many connections, each request's state (its connection, coroutine
// frames and buffers) sits on 4 KiB pages of its own, and the data TLB holds
// a few dozen of them: a request that comes back to its state after the
// other connections ran walks the page tables for it. Backed by transparent
// huge pages, the same heap is a handful of 2 MiB pages (1.7-3.5 % less CPU
// per request at 256 connections, 8 MB more resident, measured in
// docs/BENCHMARKS.md).
//
// The fast path heap_pages (common/fast_paths.hpp), also turned off by the
// config's huge_pages: false; its plain twin is the allocator's own way
// of asking the kernel for memory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dpgate::gateway {

// A transparent huge page on x86-64 (and arm64 with 4 KiB base pages). The
// kernel maps one only over 2 MiB of a region that start at a multiple of it.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// What to ask the system for when the allocator wants `bytes` aligned to
// `alignment`: whole huge pages, aligned to one at least.
struct HugeRegionRequest {
    std::size_t bytes;
    std::size_t alignment;

    bool operator==(const HugeRegionRequest&) const = default;
};
// bytes = 0 when rounding up would overflow (the allocation then fails, as
// it would have).
HugeRegionRequest hugeRegionRequest(std::size_t bytes, std::size_t alignment);

// The kernel's transparent huge page mode from the text of
// /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never"):
// the bracketed word, or "" when there is none.
std::string_view thpModeOf(std::string_view sysfs_text);
// The running kernel's mode; "" without transparent huge pages.
std::string thpMode();

// Hands the allocator's free memory back to the system: after a large
// request body is freed, so that resident memory follows what is held, not
// the peak (allocators keep what they freed for later). tcmalloc's
// ReleaseFreeMemory in a dpgate linked with it (tcmalloc_heap_pages.cpp
// installs it before main), glibc's malloc_trim elsewhere. Takes the
// allocator's page-heap lock and one madvise per free span: for requests of
// a megabyte and more, never per small request.
void returnFreeMemory();
// What returnFreeMemory() calls (tcmalloc_heap_pages.cpp's, at static initialisation).
void setReturnFreeMemory(void (*release)());

// Makes the process allocator take its memory from the system in whole,
// aligned huge pages advised MADV_HUGEPAGE (config `huge_pages`). Call it
// once, before the threads start; what was allocated before stays as it
// is. Returns what it did, for the start-up log. Defined only in a dpgate
// linked with tcmalloc (tcmalloc_heap_pages.cpp, DPGATE_TCMALLOC); other
// builds (the sanitizers') leave the heap to their allocator.
std::string backHeapWithHugePages();

}  // namespace dpgate::gateway
