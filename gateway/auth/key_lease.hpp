// A request's hold on one of its key's concurrency slots (KeyLimiter).
// Taken once the request is authenticated; given back exactly once: by
// release() just before the answer's last bytes are written (a client that
// sends its next request the moment it has the answer must find the slot
// free), or by the destructor however else the request ends.
#pragma once

#include "gateway/auth/key_limiter.hpp"
#include "gateway/platform/local_ref.hpp"

#include <memory>
#include <utility>

namespace dpgate::auth {

class KeyLease {
public:
    KeyLease() = default;
    // `key` belongs to `limiter` (KeyLimiter::find) and holds one slot.
    KeyLease(gateway::LocalRef<KeyLimiter> limiter, KeyLimiter::Key* key) : limiter_(std::move(limiter)), key_(key) {}
    KeyLease(KeyLease&& other) noexcept = default;
    KeyLease& operator=(KeyLease&& other) noexcept {
        if (this != &other) {
            release();
            limiter_ = std::move(other.limiter_);
            key_ = other.key_;
        }
        return *this;
    }
    ~KeyLease() { release(); }

    void release() noexcept {
        if (limiter_) limiter_->release(key_);
        limiter_.reset();
    }

private:
    // The limiter the slot came from, even when a reload has replaced it
    // since. A lease is taken and given back on one worker thread.
    gateway::LocalRef<KeyLimiter> limiter_;
    KeyLimiter::Key* key_ = nullptr;
};

}  // namespace dpgate::auth
