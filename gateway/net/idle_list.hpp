// A worker's idle client connections, oldest first: those waiting for a
// request's first byte (a new connection, or keep-alive between requests)
// and those lingering after a refusal. At max_connections the oldest of all
// workers' is closed to make room (Server::evictIdleConnection), as nginx
// reuses keep-alive connections when it runs out.
//
// Intrusive: a connection holds its IdleHook, so going idle and busy again
// (twice per keep-alive request) is a few pointer writes on the worker's
// thread. The age of the oldest is published in an atomic for the other
// workers' accept loops, written only when the oldest changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

namespace dpgate::gateway {

// What holds a hook: a connection the list may close when it needs room.
class IdleConnection {
public:
    virtual void closeIdle() = 0;

protected:
    ~IdleConnection() = default;
};

struct IdleHook {
    explicit IdleHook(IdleConnection* owner) : owner(owner) {}
    IdleHook(const IdleHook&) = delete;
    IdleHook& operator=(const IdleHook&) = delete;

    IdleConnection* const owner;
    IdleHook* prev = nullptr;
    IdleHook* next = nullptr;
    int64_t since_ns = 0;  // steady clock, when it went idle
    bool linked = false;
};

class IdleList {
public:
    static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

    IdleList() = default;
    IdleList(const IdleList&) = delete;
    IdleList& operator=(const IdleList&) = delete;

    // Idle from `now_ns` on (no-op when it already is). Times only grow
    // within one worker, so the newest goes last and the oldest stays first.
    void add(IdleHook& hook, int64_t now_ns) {
        if (hook.linked) return;
        hook.since_ns = now_ns;
        hook.prev = tail_;
        hook.next = nullptr;
        hook.linked = true;
        if (tail_) tail_->next = &hook;
        else head_ = &hook;
        tail_ = &hook;
        ++size_;
        if (head_ == &hook) publish();
    }

    // Busy again, or gone (no-op when it is not idle).
    void remove(IdleHook& hook) {
        if (!hook.linked) return;
        const bool was_oldest = head_ == &hook;
        if (hook.prev) hook.prev->next = hook.next;
        else head_ = hook.next;
        if (hook.next) hook.next->prev = hook.prev;
        else tail_ = hook.prev;
        hook.prev = hook.next = nullptr;
        hook.linked = false;
        --size_;
        if (was_oldest) publish();
    }

    IdleHook* oldest() const { return head_; }
    size_t size() const { return size_; }
    // From any thread: since when the oldest has been idle, or kNone.
    int64_t oldestSince() const { return oldest_since_ns_.load(std::memory_order_relaxed); }

private:
    void publish() { oldest_since_ns_.store(head_ ? head_->since_ns : kNone, std::memory_order_relaxed); }

    IdleHook* head_ = nullptr;
    IdleHook* tail_ = nullptr;
    size_t size_ = 0;
    std::atomic<int64_t> oldest_since_ns_{kNone};
};

}  // namespace dpgate::gateway
