// The first two stages of an API request: who is calling (the key, checked
// against the KeyStore), and how much they may (a slot of the key's
// concurrency and rate limits, held as a KeyLease until the answer is out).
#pragma once

#include "common/api_error.hpp"
#include "gateway/auth/key_lease.hpp"
#include "gateway/auth/key_store.hpp"
#include "gateway/platform/cycle_clock.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dpgate::gateway {

struct Authentication {
    std::optional<auth::KeyInfo> key;  // null with no refusal: a keyless call where keys are optional
    std::optional<ApiError> refusal;   // 401
};

// A key that is sent must be right even where keys are optional.
Authentication authenticate(const auth::KeyStore& keys, std::string_view authorization);

// A key whatever auth.required says (/metrics: what it shows is the
// operators', never an anonymous caller's).
Authentication authenticateAlways(const auth::KeyStore& keys, std::string_view authorization);

struct KeyLeaseResult {
    auth::KeyLease lease;             // held when allowed (empty for a keyless call)
    std::optional<ApiError> refusal;  // 429
    uint32_t retry_after_seconds = 0;
};

KeyLeaseResult leaseKey(LocalRef<auth::KeyLimiter> limiter, const std::optional<auth::KeyInfo>& key);

}  // namespace dpgate::gateway
