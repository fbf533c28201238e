#pragma once
// Runs a function on a thread whose stack is small, ends in an inaccessible
// guard page and is painted beforehand: a test of deep input then crashes at
// once on an unbounded recursion (rather than passing on the main thread's
// 8 MiB by luck), and can read how much of the stack the run used.
#include <sys/mman.h>
#include <unistd.h>

#include <pthread.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace dpgate::admission::test {

// AddressSanitizer's frames are about six times larger (redzones around
// every local): the sanitized build gets proportionally more stack, as the
// renderer's own backstop does (RenderLimits::stack_bytes).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr std::size_t kStackScale = 8;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr std::size_t kStackScale = 8;
#else
inline constexpr std::size_t kStackScale = 1;
#endif
#else
inline constexpr std::size_t kStackScale = 1;
#endif

namespace small_stack_detail {

// Runs `fn` on a `bytes` stack; returns the bytes of it that were touched,
// including what the thread library keeps at its top (the thread's static
// TLS block lives there when the caller provides the stack).
inline std::size_t run(std::size_t bytes, const std::function<void()>& fn) {
    constexpr unsigned char kPaint = 0xa5;
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t size = (bytes + page - 1) / page * page;
    void* mapping = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED) std::abort();
    auto* base = static_cast<unsigned char*>(mapping);
    if (mprotect(base, page, PROT_NONE) != 0) std::abort();  // stacks grow down, into the guard
    unsigned char* stack = base + page;
    std::memset(stack, kPaint, size);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, size);
    pthread_t thread;
    auto entry = [](void* arg) -> void* {
        (*static_cast<const std::function<void()>*>(arg))();
        return nullptr;
    };
    if (pthread_create(&thread, &attr, entry, const_cast<std::function<void()>*>(&fn)) != 0) std::abort();
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
    std::size_t untouched = 0;
    while (untouched < size && stack[untouched] == kPaint) ++untouched;
    munmap(mapping, size + page);
    return size - untouched;
}

// What a thread takes of its stack before the function runs.
inline std::size_t threadOverhead() {
    static const std::size_t overhead = run(std::size_t{16} << 20, [] {});
    return overhead;
}

}  // namespace small_stack_detail

// Calls `fn` on a thread with `stack_bytes` (times kStackScale) of stack for
// it to use, and returns how much of that it used (its high-water mark).
// Overflowing it hits the guard page: the process dies with SIGSEGV.
inline std::size_t runOnSmallStack(std::size_t stack_bytes, const std::function<void()>& fn) {
    const std::size_t overhead = small_stack_detail::threadOverhead();
    const std::size_t used = small_stack_detail::run(stack_bytes * kStackScale + overhead, fn);
    return used > overhead ? used - overhead : 0;
}

}  // namespace dpgate::admission::test
