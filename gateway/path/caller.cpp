#include "gateway/path/caller.hpp"

#include <string>

namespace dpgate::gateway {

Authentication authenticate(const auth::KeyStore& keys, std::string_view authorization) {
    Authentication out;
    out.key = keys.authenticate(authorization);
    if (!out.key && (keys.required() || !authorization.empty()))
        out.refusal = ApiError::unauthorized(
            authorization.empty() ? "You didn't provide an API key: send it as 'Authorization: Bearer <key>'."
                                  : "Incorrect API key provided.");
    return out;
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
