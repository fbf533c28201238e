// Per-key limits from the keys file: max_concurrent requests in flight and
// requests_per_min. Pure and clock-injected: the caller passes `now_ms`
// from a steady clock, so tests drive time by hand. Thread-safe: the set of
// keys is fixed at construction and each key has its own state, so two keys
// never contend. A key without requests_per_min takes no lock at all (its
// in-flight count is one atomic, sharded by thread for a key without any
// limit); one with it takes its own mutex for the bucket.
//
// requests_per_min is a token bucket: it holds at most requests_per_min
// requests (a full minute's quota may come as one burst), starts full, and
// refills continuously at requests_per_min per 60 s. Integer arithmetic in
// units of 1/60000 request, so refill per millisecond is exactly
// requests_per_min units and nothing drifts.
#pragma once

#include "conf/config.hpp"
#include "gateway/metrics/sharded_count.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace dpgate::auth {

struct RateDecision {
    bool allowed = true;
    // For the Retry-After header on a 429; 0 when allowed. At least 1.
    // For max_concurrent it is 1: when a stream ends cannot be known.
    uint32_t retry_after_seconds = 0;
    std::string_view reason;  // "" | "max_concurrent" | "requests_per_min"
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
    // Denied: nothing is held, no request is counted against the minute.
    // Unknown names are allowed and not tracked (release is then a no-op).
    RateDecision tryAcquire(std::string_view key_name, uint64_t now_ms) { return tryAcquire(find(key_name), now_ms); }
    void release(std::string_view key_name) { release(find(key_name)); }
    RateDecision tryAcquire(Key* key, uint64_t now_ms);
    void release(Key* key);

    // Requests of this key now in flight (for metrics and tests).
    uint32_t inFlight(std::string_view key_name) const;

private:
    // Built once; only the Keys' counts change afterwards.
    std::map<std::string, std::unique_ptr<Key>, std::less<>> keys_;
};

struct KeyLimiter::Key {
    uint32_t max_concurrent = 0;    // 0 = unlimited
    uint32_t requests_per_min = 0;  // 0 = unlimited
    bool limited() const { return max_concurrent > 0 || requests_per_min > 0; }
    // A limited key's requests in flight: exact, its acquirers compare it
    // with max_concurrent.
    std::atomic<uint32_t> in_flight{0};
    // An unlimited key's: only counted, and moved by every worker on every
    // request, so sharded (gateway/metrics/sharded_count.hpp).
    metrics::ShardedCount<int64_t> unlimited_in_flight;
    // The bucket, only with requests_per_min; under `mutex`, which also
    // orders that key's in-flight check against its charge.
    std::mutex mutex;
    uint64_t bucket_units = 0;
    uint64_t last_refill_ms = 0;
    bool started = false;
};

}  // namespace dpgate::auth
