#include "gateway/auth/key_limiter.hpp"

#include <algorithm>

namespace dpgate::auth {

namespace {

// One request costs a minute's worth of milliseconds in bucket units; the
// bucket gains requests_per_min units per millisecond.
constexpr uint64_t units_per_request = 60000;

}  // namespace

KeyLimiter::KeyLimiter(const conf::AuthConfig& auth) {
    for (const conf::AuthKey& key : auth.keys) {
        auto state = std::make_unique<State>();
        state->max_concurrent = key.max_concurrent;
        state->requests_per_min = key.requests_per_min;
        states_.try_emplace(key.name, std::move(state));  // the loader refuses duplicate names
    }
}

KeyLimiter::State* KeyLimiter::find(std::string_view key_name) const {
    const auto it = states_.find(key_name);
    return it == states_.end() ? nullptr : it->second.get();
}

RateDecision KeyLimiter::tryAcquire(std::string_view key_name, uint64_t now_ms) {
    State* state = find(key_name);
    if (!state) return {};
    const std::lock_guard lock(state->mutex);

    const uint64_t rate = state->requests_per_min;
    if (rate > 0) {
        const uint64_t capacity = rate * units_per_request;
        if (!state->started) {
            state->started = true;
            state->bucket_units = capacity;
            state->last_refill_ms = now_ms;
        } else if (now_ms > state->last_refill_ms) {  // a clock that steps back refills nothing
            const uint64_t elapsed_ms = now_ms - state->last_refill_ms;
            // A minute refills everything; capping first also keeps the product small.
            state->bucket_units = elapsed_ms >= units_per_request
                                      ? capacity
                                      : std::min(capacity, state->bucket_units + elapsed_ms * rate);
            state->last_refill_ms = now_ms;
        }
    }

    if (state->max_concurrent > 0 && state->in_flight >= state->max_concurrent) return {false, 1, "max_concurrent"};

    if (rate > 0) {
        if (state->bucket_units < units_per_request) {
            const uint64_t wait_ms = (units_per_request - state->bucket_units + rate - 1) / rate;
            const uint64_t wait_s = std::max<uint64_t>(1, (wait_ms + 999) / 1000);
            return {false, static_cast<uint32_t>(wait_s), "requests_per_min"};
        }
        state->bucket_units -= units_per_request;
    }
    ++state->in_flight;
    return {};
}

void KeyLimiter::release(std::string_view key_name) {
    State* state = find(key_name);
    if (!state) return;
    const std::lock_guard lock(state->mutex);
    if (state->in_flight > 0) --state->in_flight;
}

uint32_t KeyLimiter::inFlight(std::string_view key_name) const {
    State* state = find(key_name);
    if (!state) return 0;
    const std::lock_guard lock(state->mutex);
    return state->in_flight;
}

}  // namespace dpgate::auth
