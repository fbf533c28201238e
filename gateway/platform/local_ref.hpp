// A reference to a published value (Published<T>::local()) for the thread
// that loaded it. Its count is a plain integer, shared with that thread's
// hold on the value, where a std::shared_ptr copy or drop is a locked
// instruction even when no other thread shares its count: a proxied request
// takes the key store, the key limiter and the routing table, which would be
// six locked instructions at about 14 ns each on these machines. So no two
// threads may use references to one hold at once: a request's are made,
// copied and dropped by the worker thread serving it, or dropped after that
// thread has stopped, by the thread that destroys its io_context
// (ThreadSanitizer sees any overlap).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

namespace dpgate::gateway {

namespace published_detail {

// One thread's hold on one stored value: it keeps the value alive while the
// thread's entry for it, or any LocalRef made from that entry, remains.
struct Hold {
    explicit Hold(std::shared_ptr<const void> v) : value(std::move(v)) {}
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

    std::shared_ptr<const void> value;
    uint64_t refs = 1;  // the thread's entry's, until it moves on to a newer value
};

inline void retain(Hold* hold) noexcept { ++hold->refs; }

inline void release(Hold* hold) noexcept {
    if (--hold->refs == 0) delete hold;
}

}  // namespace published_detail

template <class T>
class LocalRef {
public:
    LocalRef() = default;
    LocalRef(const LocalRef& other) noexcept : hold_(other.hold_), value_(other.value_) {
        if (hold_) published_detail::retain(hold_);
    }
    LocalRef(LocalRef&& other) noexcept
        : hold_(std::exchange(other.hold_, nullptr)), value_(std::exchange(other.value_, nullptr)) {}
    LocalRef& operator=(LocalRef other) noexcept {
        std::swap(hold_, other.hold_);
        std::swap(value_, other.value_);
        return *this;
    }
    ~LocalRef() { reset(); }

    void reset() noexcept {
        if (hold_) published_detail::release(std::exchange(hold_, nullptr));
        value_ = nullptr;
    }

    T* get() const noexcept { return value_; }
    T& operator*() const noexcept { return *value_; }
    T* operator->() const noexcept { return value_; }
    explicit operator bool() const noexcept { return value_ != nullptr; }

private:
    template <class>
    friend class Published;
    // A new reference through `hold`, whose value is `value`.
    LocalRef(published_detail::Hold* hold, T* value) noexcept : hold_(hold), value_(value) {
        published_detail::retain(hold_);
    }

    published_detail::Hold* hold_ = nullptr;
    T* value_ = nullptr;
};

}  // namespace dpgate::gateway
