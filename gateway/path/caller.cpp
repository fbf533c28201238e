#include "gateway/path/caller.hpp"

#include <string>

namespace dpgate::gateway {

namespace {

Authentication authenticateIf(const auth::KeyStore& keys, std::string_view authorization, bool required) {
    Authentication out;
    out.key = keys.authenticate(authorization);
    if (!out.key && (required || !authorization.empty()))
        out.refusal = ApiError::unauthorized(
            authorization.empty() ? "You didn't provide an API key: send it as 'Authorization: Bearer <key>'."
                                  : "Incorrect API key provided.");
    return out;
}

}  // namespace

Authentication authenticate(const auth::KeyStore& keys, std::string_view authorization) {
    return authenticateIf(keys, authorization, keys.required());
}

Authentication authenticateAlways(const auth::KeyStore& keys, std::string_view authorization) {
    return authenticateIf(keys, authorization, true);
}

KeyLeaseResult leaseKey(LocalRef<auth::KeyLimiter> limiter, const std::optional<auth::KeyInfo>& key) {
    KeyLeaseResult out;
    if (!key) return out;
    auth::KeyLimiter::Key* limits = limiter->find(key->name);
    const auth::RateDecision decision = limiter->tryAcquire(limits);
    if (!decision.allowed) {
        out.refusal = ApiError::rateLimited("Rate limit reached for key '" + key->name +
                                            "': " + std::string(decision.reason) + ".");
        out.retry_after_seconds = decision.retry_after_seconds;
        return out;
    }
    out.lease = auth::KeyLease(std::move(limiter), limits);
    return out;
}

}  // namespace dpgate::gateway
