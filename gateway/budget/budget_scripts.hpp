// The two Lua scripts that keep a key's budgets in Redis, and what their
// answers mean. Each runs atomically in Redis, so replicas drawing on one
// key never both take its last tokens. Redis's clock (TIME) is the only
// clock: replicas whose clocks disagree still share one minute and one day.
//
// Keys, under limits.redis.key_prefix (the braces keep a key's two on one
// Redis Cluster slot):
//   <prefix>budget:{<key>}:min        hash r, t, ms: the minute buckets
//                                     (requests, tokens, as of ms); expires
//                                     2 minutes after its last use (full by then)
//   <prefix>budget:{<key>}:day:<day>  hash r, t: the UTC day's counts;
//                                     expires 2 days after its last use
//
// reserve  ARGV requests_per_min requests_per_day tokens_per_min
//          tokens_per_day tokens -> {limit, wait_ms, requests_left_milli,
//          tokens_left_milli, day_requests, day_tokens, day, ms_to_midnight}
//          limit 0: charged; 1..4: refused by requests_per_min,
//          requests_per_day, tokens_per_min, tokens_per_day (windows.hpp's
//          Limit), nothing charged.
// settle   ARGV requests_per_min tokens_per_min refund day -> 1
//          refund (may be negative) goes back to the token bucket and, when
//          `day` is still kept, to that day's count.
#pragma once

#include "gateway/budget/windows.hpp"

#include <optional>
#include <string>
#include <vector>

namespace dpgate::gateway::budget {

extern const char* const kReserveScript;
extern const char* const kSettleScript;

// The two Redis keys of a key's budgets; the day's is `day_prefix` + day.
struct RedisKeys {
    std::string minute;
    std::string day_prefix;
};
RedisKeys redisKeys(const std::string& key_prefix, std::string_view key_name);

// The reserve script's answer (integers, as Redis turns Lua numbers into
// them) as a decision under `budget`; nullopt when it is not that shape.
std::optional<Decision> readReserveAnswer(const std::vector<long long>& values, const Budget& budget);

}  // namespace dpgate::gateway::budget
