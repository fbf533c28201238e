// The bytes of request bodies the whole process holds at once, against
// limits.max_buffered_body_bytes: without it the ceiling is max_connections
// x max_body_bytes (terabytes at the defaults).
//
// A body takes its share before its bytes are read (ClientRequestParser: the
// Content-Length at the body's start, each chunk's size at its size line),
// and its Share gives it back when the body is freed, exactly once. One
// atomic for every worker: a take is a compare-and-swap, a give a subtract,
// once per request with a body.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace dpgate::gateway {

class BodyBudget {
public:
    // What one body holds; given back on destruction.
    class Share {
    public:
        Share() = default;
        Share(Share&& other) noexcept
            : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
        Share& operator=(Share&& other) noexcept {
            if (this != &other) {
                giveBack();
                budget_ = std::exchange(other.budget_, nullptr);
                bytes_ = std::exchange(other.bytes_, 0);
            }
            return *this;
        }
        Share(const Share&) = delete;
        Share& operator=(const Share&) = delete;
        ~Share() { giveBack(); }

        uint64_t bytes() const { return bytes_; }

    private:
        friend class BodyBudget;
        void giveBack() noexcept {
            if (bytes_ != 0) budget_->held_.fetch_sub(bytes_, std::memory_order_relaxed);
            bytes_ = 0;
        }

        BodyBudget* budget_ = nullptr;
        uint64_t bytes_ = 0;
    };

    BodyBudget() = default;
    BodyBudget(const BodyBudget&) = delete;
    BodyBudget& operator=(const BodyBudget&) = delete;

    // Adds `bytes` to `share` when the process's total stays within
    // `limit_bytes`; false, and nothing taken, when it would go beyond.
    // A share holds bytes of one budget only.
    bool take(Share& share, uint64_t bytes, uint64_t limit_bytes) {
        uint64_t held = held_.load(std::memory_order_relaxed);
        do {
            if (bytes > limit_bytes || held > limit_bytes - bytes) return false;
        } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
        share.budget_ = this;
        share.bytes_ += bytes;
        return true;
    }

    // Bytes held by every share now (the gauge dpgate_buffered_body_bytes).
    uint64_t heldBytes() const { return held_.load(std::memory_order_relaxed); }

private:
    std::atomic<uint64_t> held_{0};
};

}  // namespace dpgate::gateway
