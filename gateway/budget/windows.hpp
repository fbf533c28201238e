// One key's budgets in this process: requests and tokens per minute, and per
// UTC day. Pure and clock-injected (tests drive time by hand); thread-safe,
// one mutex per key.
//
// A minute is a token bucket: it holds at most a minute's budget (which may
// come as one burst), starts full and refills continuously at the budget per
// 60 s. A day is the UTC calendar day: its count starts at 0 at midnight.
// Integer arithmetic: a bucket counts in 1/60,000 of a request or token, so
// a millisecond refills exactly `per_min` units and nothing drifts.
//
// A request is charged when it is admitted (reserve: prompt + images + the
// whole output budget) and settled when its answer ends: what it did not use
// goes back to the bucket it came from and to its day (when that day is
// still today).
#pragma once

#include <cstdint>
#include <mutex>
#include <string_view>

namespace dpgate::gateway::budget {

// The budget a decision was made under, in the order they are checked.
enum class Limit : uint8_t { none, requests_per_min, requests_per_day, tokens_per_min, tokens_per_day };
std::string_view limitName(Limit limit);

// A key's budgets (0 = unlimited).
struct Budget {
    uint64_t requests_per_min = 0;
    uint64_t requests_per_day = 0;
    uint64_t tokens_per_min = 0;
    uint64_t tokens_per_day = 0;
    bool any() const { return requests_per_min || requests_per_day || tokens_per_min || tokens_per_day; }
    // This budget split `ways` (a replica's share while the shared store is
    // away): each limit divided, rounded up, at least 1.
    Budget share(uint32_t ways) const;
    bool operator==(const Budget&) const = default;
};

// What is left after a decision: the x-ratelimit-* headers. A limit of 0
// means the key has no such budget (the headers are then left out). The
// request side reports the minute when there is one, else the day; the
// token side likewise.
struct Headroom {
    uint64_t limit_requests = 0;
    uint64_t remaining_requests = 0;
    uint64_t reset_requests_ms = 0;  // until the window is whole again
    uint64_t limit_tokens = 0;
    uint64_t remaining_tokens = 0;
    uint64_t reset_tokens_ms = 0;
};

enum class Verdict : uint8_t {
    allowed,      // charged: settle() it when the answer ends
    limited,      // 429: not now, try after retry_after_ms
    never_fits,   // larger than a whole window of its budget: never
    unavailable,  // the shared store is away and limits.on_store_unavailable is deny
};

struct Decision {
    Verdict verdict = Verdict::allowed;
    Limit limit = Limit::none;
    uint64_t retry_after_ms = 0;
    Headroom headroom;
    // The UTC day (days since 1970-01-01) the request was charged to.
    uint32_t day = 0;
    // Decided by this replica alone (or denied) because Redis was away.
    bool store_away = false;
};

// Milliseconds since the Unix epoch -> UTC day, and how long until it ends.
inline uint32_t utcDay(uint64_t unix_ms) { return uint32_t(unix_ms / 86'400'000); }
inline uint64_t msToMidnight(uint64_t unix_ms) { return 86'400'000 - unix_ms % 86'400'000; }

class KeyWindows {
public:
    // One request of `tokens`. `now_ms` from a steady clock (the minute),
    // `unix_ms` from the wall clock (the day). Never-fitting is judged
    // against `whole` (the key's own budget), limits against `budget` (the
    // same, or this replica's share of it): a request larger than the share
    // but within the budget goes when the share's bucket is full, leaving
    // the bucket in debt.
    Decision reserve(const Budget& budget, const Budget& whole, uint64_t tokens, uint64_t now_ms, uint64_t unix_ms);

    // Charges one request of `tokens` whatever the budget says (decided
    // elsewhere: in Redis), so that this replica's windows know its own use
    // when it has to decide alone.
    void charge(const Budget& budget, uint64_t tokens, uint64_t now_ms, uint64_t unix_ms);

    // Gives back `refund` tokens of a request charged on `day` (negative: it
    // used more than it reserved, and the rest is charged now).
    void settle(const Budget& budget, int64_t refund, uint32_t day, uint64_t now_ms);

    // Whether a request would be refused for its request budgets whatever
    // its size (checked from the head, before the body is read). Charges
    // nothing. 0: it may go on; else how long until it could.
    uint64_t requestsBlockedFor(const Budget& budget, uint64_t now_ms, uint64_t unix_ms);

    // What today's counts are (this process's windows). Changes nothing
    // but the day, at midnight.
    struct Today {
        uint32_t day = 0;
        uint64_t requests = 0;
        uint64_t tokens = 0;
    };
    Today today(uint64_t unix_ms);
    // A day's counts read back at start (state.dir); ignored unless `day` is today.
    void restoreDay(uint32_t day, uint64_t requests, uint64_t tokens, uint64_t unix_ms);

private:
    // Brings the buckets to `now_ms` and the day to `unix_ms`'s.
    void advance(const Budget& budget, uint64_t now_ms, uint64_t unix_ms);
    Headroom headroom(const Budget& budget, uint64_t unix_ms) const;

    std::mutex mutex_;
    bool started_ = false;
    uint64_t last_ms_ = 0;
    int64_t request_units_ = 0;  // signed: a request larger than a share leaves debt
    int64_t token_units_ = 0;
    int64_t request_cap_ = 0;  // the capacities of the budget last applied
    int64_t token_cap_ = 0;
    uint32_t day_ = 0;
    uint64_t day_requests_ = 0;
    uint64_t day_tokens_ = 0;
};

}  // namespace dpgate::gateway::budget
