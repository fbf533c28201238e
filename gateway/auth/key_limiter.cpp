#include "gateway/auth/key_limiter.hpp"

#include <algorithm>

namespace dpgate::auth {

namespace {

// One request costs a minute's worth of milliseconds in bucket units; the
// bucket gains requests_per_min units per millisecond.
constexpr uint64_t units_per_request = 60000;

// One more in flight unless that would pass `max_concurrent` (0: no limit).
bool takeSlot(std::atomic<uint32_t>& in_flight, uint32_t max_concurrent) {
    uint32_t now = in_flight.load(std::memory_order_relaxed);
    do {
        if (max_concurrent > 0 && now >= max_concurrent) return false;
    } while (!in_flight.compare_exchange_weak(now, now + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
    return true;
}

}  // namespace

KeyLimiter::KeyLimiter(const conf::AuthConfig& auth) {
    for (const conf::AuthKey& key : auth.keys) {
        auto state = std::make_unique<Key>();
        state->max_concurrent = key.max_concurrent;
        state->requests_per_min = key.requests_per_min;
        keys_.try_emplace(key.name, std::move(state));  // the loader refuses duplicate names
    }
}

KeyLimiter::Key* KeyLimiter::find(std::string_view key_name) const {
    const auto it = keys_.find(key_name);
    return it == keys_.end() ? nullptr : it->second.get();
}

RateDecision KeyLimiter::tryAcquire(Key* key, uint64_t now_ms) {
    if (!key) return {};
    if (!key->limited()) {
        key->unlimited_in_flight.add(1);
        return {};
    }
    const uint64_t rate = key->requests_per_min;
    if (rate == 0) {
        if (!takeSlot(key->in_flight, key->max_concurrent)) return {false, 1, "max_concurrent"};
        return {};
    }

    const std::lock_guard lock(key->mutex);
    const uint64_t capacity = rate * units_per_request;
    if (!key->started) {
        key->started = true;
        key->bucket_units = capacity;
        key->last_refill_ms = now_ms;
    } else if (now_ms > key->last_refill_ms) {  // a clock that steps back refills nothing
        const uint64_t elapsed_ms = now_ms - key->last_refill_ms;
        // A minute refills everything; capping first also keeps the product small.
        key->bucket_units =
            elapsed_ms >= units_per_request ? capacity : std::min(capacity, key->bucket_units + elapsed_ms * rate);
        key->last_refill_ms = now_ms;
    }
    // Concurrency first: a request refused for it must not use up the minute.
    // Only acquirers that hold the mutex raise the count, so the slot taken
    // here stays free until the charge below decides.
    if (key->max_concurrent > 0 && key->in_flight.load(std::memory_order_acquire) >= key->max_concurrent)
        return {false, 1, "max_concurrent"};
    if (key->bucket_units < units_per_request) {
        const uint64_t wait_ms = (units_per_request - key->bucket_units + rate - 1) / rate;
        const uint64_t wait_s = std::max<uint64_t>(1, (wait_ms + 999) / 1000);
        return {false, static_cast<uint32_t>(wait_s), "requests_per_min"};
    }
    key->bucket_units -= units_per_request;
    key->in_flight.fetch_add(1, std::memory_order_acq_rel);
    return {};
}

void KeyLimiter::release(Key* key) {
    if (!key) return;
    if (!key->limited()) {
        key->unlimited_in_flight.sub(1);
        return;
    }
    uint32_t now = key->in_flight.load(std::memory_order_relaxed);
    while (now > 0 &&
           !key->in_flight.compare_exchange_weak(now, now - 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
    }
}

uint32_t KeyLimiter::inFlight(std::string_view key_name) const {
    const Key* key = find(key_name);
    if (!key) return 0;
    // Sharded, so a release without its acquire (KeyLease never makes one)
    // is not caught at the cell; the read stops at zero all the same.
    if (!key->limited()) return uint32_t(std::max<int64_t>(0, key->unlimited_in_flight.value()));
    return key->in_flight.load(std::memory_order_acquire);
}

}  // namespace dpgate::auth
