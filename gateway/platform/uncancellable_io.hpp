// send() and recv() on a non-blocking socket, without glibc's cancellation
// bookkeeping.
//
// glibc's send() and recv() are cancellation points: around the system
// call each one switches the thread to asynchronous cancellation and back,
// two locked compare-and-swaps. A locked instruction waits for the core's
// pending stores to drain; on these machines 32 more per request cost 2.3 %
// of a small proxied request's CPU, and these two calls would make 8 per
// request. dpgate never cancels a thread, so here the system call is made
// directly (syscall() takes its arguments as longs: each is passed as one).
// Under the sanitizers the libc calls stay: they intercept them to check
// the buffers and to follow the descriptors.
//
// The fast path uncancellable_io (common/fast_paths.hpp); the libc call is
// its plain twin (`direct` false), and uncancellable_io_test runs both.
#pragma once

#include "common/fast_paths.hpp"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>

namespace dpgate::gateway {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DPGATE_LIBC_SOCKET_CALLS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define DPGATE_LIBC_SOCKET_CALLS 1
#endif
#endif

// As send(fd, data, size, flags): bytes taken, or -1 with errno set.
inline ssize_t sendUncancellable(int fd, const void* data, size_t size, int flags,
                                 bool direct = fastPathOn(FastPath::uncancellable_io)) {
#ifndef DPGATE_LIBC_SOCKET_CALLS
    if (direct) return ::syscall(SYS_sendto, long(fd), data, size, long(flags), nullptr, 0L);
#endif
    (void)direct;
    return ::send(fd, data, size, flags);
}

// As recv(fd, data, size, flags): bytes read (0 at the end of the stream),
// or -1 with errno set.
inline ssize_t recvUncancellable(int fd, void* data, size_t size, int flags,
                                 bool direct = fastPathOn(FastPath::uncancellable_io)) {
#ifndef DPGATE_LIBC_SOCKET_CALLS
    if (direct) return ::syscall(SYS_recvfrom, long(fd), data, size, long(flags), nullptr, nullptr);
#endif
    (void)direct;
    return ::recv(fd, data, size, flags);
}

}  // namespace dpgate::gateway
