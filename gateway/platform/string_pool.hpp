// Buffers that outlive the request that filled them.
//
// A request's heads (the client's head as parsed, the upstream request's,
// the backend's answer head, the client's answer head) and a small body each
// took a fresh allocation and freed it at the end of the request. Each
// thread keeps a few of those buffers instead, and the next request takes
// them back: once a worker is warm, its requests' heads cost no allocation.
// Bounded: at most kKeep buffers of at most kMaxBytes each per thread.
#pragma once

#include <cstddef>
#include <string>

namespace dpgate::gateway {

class StringPool {
public:
    static constexpr size_t kKeep = 32;
    static constexpr size_t kMaxBytes = 64 * 1024;

    // An empty string, with the buffer of one given back earlier when the
    // thread has one.
    static std::string take();
    // Keeps `s`'s buffer for a later take() when it is one worth keeping
    // (allocated, at most kMaxBytes) and the thread's pool has room.
    static void give(std::string&& s) noexcept;
};

}  // namespace dpgate::gateway
