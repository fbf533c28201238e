#include "gateway/auth/key_limiter.hpp"

#include <algorithm>

namespace dpgate::auth {

namespace {

// One more in flight unless that would pass `max_concurrent`.
bool takeSlot(std::atomic<uint32_t>& in_flight, uint32_t max_concurrent) {
    uint32_t now = in_flight.load(std::memory_order_relaxed);
    do {
        if (now >= max_concurrent) return false;
    } while (!in_flight.compare_exchange_weak(now, now + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
    return true;
}

}  // namespace

KeyLimiter::KeyLimiter(const conf::AuthConfig& auth) {
    for (const conf::AuthKey& key : auth.keys) {
        auto state = std::make_unique<Key>();
        state->max_concurrent = key.max_concurrent;
        keys_.try_emplace(key.name, std::move(state));  // the loader refuses duplicate names
    }
}

KeyLimiter::Key* KeyLimiter::find(std::string_view key_name) const {
    const auto it = keys_.find(key_name);
    return it == keys_.end() ? nullptr : it->second.get();
}

RateDecision KeyLimiter::tryAcquire(Key* key) {
    if (!key) return {};
    if (!key->limited()) {
        key->unlimited_in_flight.add(1);
        return {};
    }
    if (!takeSlot(key->in_flight, key->max_concurrent)) return {false, 1, "max_concurrent"};
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
