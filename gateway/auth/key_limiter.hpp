// Per-key concurrency from the keys file: max_concurrent requests in
// flight, held by each request until its answer ends. The budgets (requests
// and tokens per minute and day) are gateway/budget/'s. Thread-safe: the set
// of keys is fixed at construction and each key has its own count, one
// atomic (sharded by thread for a key without a limit), so two keys never
// contend and nothing takes a lock.
#pragma once

#include "conf/config.hpp"
#include "gateway/metrics/sharded_count.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace dpgate::auth {

struct RateDecision {
    bool allowed = true;
    // For the Retry-After header on a 429; 0 when allowed. 1 for
    // max_concurrent: when a stream ends cannot be known.
    uint32_t retry_after_seconds = 0;
    std::string_view reason;  // "" | "max_concurrent"
};

class KeyLimiter {
public:
    explicit KeyLimiter(const conf::AuthConfig& auth);

    // One key's limits and counts; found once per request by name, then
    // used by pointer (KeyLease keeps it until the release).
    struct Key;
    // Null for a name the limiter does not know.
    Key* find(std::string_view key_name) const;

    // Allowed: the caller holds one slot and must call release(key_name)
    // exactly once when the request ends (response fully sent or aborted).
    // Denied: nothing is held. Unknown names are allowed and not tracked
    // (release is then a no-op).
    RateDecision tryAcquire(std::string_view key_name) { return tryAcquire(find(key_name)); }
    void release(std::string_view key_name) { release(find(key_name)); }
    RateDecision tryAcquire(Key* key);
    void release(Key* key);

    // Requests of this key now in flight (for metrics and tests).
    uint32_t inFlight(std::string_view key_name) const;

private:
    // Built once; only the Keys' counts change afterwards.
    std::map<std::string, std::unique_ptr<Key>, std::less<>> keys_;
};

struct KeyLimiter::Key {
    uint32_t max_concurrent = 0;  // 0 = unlimited
    bool limited() const { return max_concurrent > 0; }
    // A limited key's requests in flight: exact, its acquirers compare it
    // with max_concurrent.
    std::atomic<uint32_t> in_flight{0};
    // An unlimited key's: only counted, and moved by every worker on every
    // request, so sharded (gateway/metrics/sharded_count.hpp).
    metrics::ShardedCount<int64_t> unlimited_in_flight;
};

}  // namespace dpgate::auth
