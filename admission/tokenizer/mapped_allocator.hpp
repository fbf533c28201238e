#pragma once
// The allocator of the tokenizer's scratch buffers, which one long text
// grows to tens of megabytes: blocks of kMappedBytes or more are mapped
// from the kernel and unmapped when freed, so they go back to the OS
// whatever the process's malloc would keep (glibc keeps a freed block in
// its heap once an earlier large free raised its mmap threshold; tcmalloc
// keeps freed spans for reuse). Smaller blocks come from operator new.
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <new>

namespace dpgate::admission {

namespace mapped_detail {
inline std::atomic<std::size_t> bytes{0};
inline std::atomic<std::size_t> peak_bytes{0};
}  // namespace mapped_detail

// Bytes mapped by MappedAllocator now, and the most at any time since the
// last reset (the process's: tests measure a count's peak memory with them).
inline std::size_t mappedBytes() { return mapped_detail::bytes.load(std::memory_order_relaxed); }
inline std::size_t peakMappedBytes() { return mapped_detail::peak_bytes.load(std::memory_order_relaxed); }
inline void resetPeakMappedBytes() { mapped_detail::peak_bytes.store(mappedBytes(), std::memory_order_relaxed); }

#if defined(__SANITIZE_ADDRESS__)
#define DPGATE_MAPPED_ALLOCATOR_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DPGATE_MAPPED_ALLOCATOR_OFF 1
#endif
#endif

template <typename T>
struct MappedAllocator {
    using value_type = T;
#if defined(DPGATE_MAPPED_ALLOCATOR_OFF)
    // Under ASan every block comes from operator new, where overflows are seen.
    static constexpr std::size_t kMappedBytes = ~std::size_t{0};
#else
    static constexpr std::size_t kMappedBytes = std::size_t{1} << 20;
#endif

    MappedAllocator() = default;
    template <typename U>
    MappedAllocator(const MappedAllocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        const std::size_t bytes = n * sizeof(T);
        if (bytes < kMappedBytes) return static_cast<T*>(::operator new(bytes));
        void* const p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        const std::size_t now = mapped_detail::bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
        std::size_t peak = mapped_detail::peak_bytes.load(std::memory_order_relaxed);
        while (now > peak && !mapped_detail::peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
        }
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        const std::size_t bytes = n * sizeof(T);
        if (bytes < kMappedBytes) {
            ::operator delete(p);
        } else {
            ::munmap(p, bytes);
            mapped_detail::bytes.fetch_sub(bytes, std::memory_order_relaxed);
        }
    }
    template <typename U>
    bool operator==(const MappedAllocator<U>&) const noexcept {
        return true;
    }
};

}  // namespace dpgate::admission
