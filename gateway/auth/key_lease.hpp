// A request's hold on one of its key's concurrency slots (KeyLimiter).
// Taken once the request is authenticated; given back exactly once: by
// release() just before the answer's last bytes are written (a client that
// sends its next request the moment it has the answer must find the slot
// free), or by the destructor however else the request ends.
#pragma once

#include "gateway/auth/key_limiter.hpp"

#include <memory>
#include <string>
#include <utility>

namespace dpgate::auth {

class KeyLease {
public:
    KeyLease() = default;
    KeyLease(std::shared_ptr<KeyLimiter> limiter, std::string key_name)
        : limiter_(std::move(limiter)), key_name_(std::move(key_name)) {}
    KeyLease(KeyLease&& other) noexcept = default;
    KeyLease& operator=(KeyLease&& other) noexcept {
        if (this != &other) {
            release();
            limiter_ = std::move(other.limiter_);
            key_name_ = std::move(other.key_name_);
        }
        return *this;
    }
    ~KeyLease() { release(); }

    void release() noexcept {
        if (limiter_) limiter_->release(key_name_);
        limiter_.reset();
    }

private:
    // The limiter the slot came from, even when a reload has replaced it since.
    std::shared_ptr<KeyLimiter> limiter_;
    std::string key_name_;
};

}  // namespace dpgate::auth
