#include "gateway/budget/budget_scripts.hpp"

#include <algorithm>

namespace dpgate::gateway::budget {

// Buckets are kept as fractions (Lua numbers are doubles) and written with
// 17 significant digits, so a round trip through the hash loses nothing;
// day counts are integers moved by HINCRBY, exact.
const char* const kReserveScript = R"lua(
local rpm, rpd = tonumber(ARGV[1]), tonumber(ARGV[2])
local tpm, tpd, cost = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local day = math.floor(tonumber(clock[1]) / 86400)
local to_midnight = (day + 1) * 86400000 - now
local held = redis.call('HMGET', KEYS[1], 'r', 't', 'ms')
local r, t, last = tonumber(held[1]), tonumber(held[2]), tonumber(held[3])
if not (r and t and last) then r, t, last = rpm, tpm, now end
local elapsed = math.max(0, math.min(now - last, 60000))
r = math.min(rpm, r + elapsed * rpm / 60000)
t = math.min(tpm, t + elapsed * tpm / 60000)
local day_key = KEYS[2] .. day
local counts = redis.call('HMGET', day_key, 'r', 't')
local dr, dt = tonumber(counts[1]) or 0, tonumber(counts[2]) or 0
local limit, wait = 0, 0
if rpm > 0 and r < 1 then
  limit, wait = 1, math.ceil((1 - r) * 60000 / rpm)
elseif rpd > 0 and dr >= rpd then
  limit, wait = 2, to_midnight
elseif tpm > 0 and t < cost then
  limit, wait = 3, math.ceil((cost - t) * 60000 / tpm)
elseif tpd > 0 and dt + cost > tpd then
  limit, wait = 4, to_midnight
else
  if rpm > 0 then r = r - 1 end
  if tpm > 0 then t = t - cost end
  dr = redis.call('HINCRBY', day_key, 'r', 1)
  dt = redis.call('HINCRBY', day_key, 't', ARGV[5])
  redis.call('PEXPIRE', day_key, 172800000)
end
redis.call('HSET', KEYS[1], 'r', string.format('%.17g', r), 't', string.format('%.17g', t), 'ms', now)
redis.call('PEXPIRE', KEYS[1], 120000)
return {limit, wait, math.floor(r * 1000), math.floor(t * 1000), dr, dt, day, to_midnight}
)lua";

const char* const kSettleScript = R"lua(
local rpm, tpm, refund = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local held = redis.call('HMGET', KEYS[1], 'r', 't', 'ms')
local r, t, last = tonumber(held[1]), tonumber(held[2]), tonumber(held[3])
if r and t and last and tpm > 0 then
  local elapsed = math.max(0, math.min(now - last, 60000))
  r = math.min(rpm, r + elapsed * rpm / 60000)
  t = math.min(tpm, t + elapsed * tpm / 60000 + refund)
  redis.call('HSET', KEYS[1], 'r', string.format('%.17g', r), 't', string.format('%.17g', t), 'ms', now)
  redis.call('PEXPIRE', KEYS[1], 120000)
end
local day_key = KEYS[2] .. ARGV[4]
if redis.call('EXISTS', day_key) == 1 then
  local left = redis.call('HINCRBY', day_key, 't', -refund)
  if left < 0 then redis.call('HSET', day_key, 't', 0) end
end
return 1
)lua";

RedisKeys redisKeys(const std::string& key_prefix, std::string_view key_name) {
    std::string base = key_prefix + "budget:{" + std::string(key_name) + "}:";
    return {base + "min", base + "day:"};
}

std::optional<Decision> readReserveAnswer(const std::vector<long long>& v, const Budget& budget) {
    if (v.size() != 8 || v[0] < 0 || v[0] > 4 || v[1] < 0 || v[6] < 0 || v[7] < 0) return std::nullopt;
    Decision d;
    d.limit = Limit(v[0]);
    d.verdict = d.limit == Limit::none ? Verdict::allowed : Verdict::limited;
    d.retry_after_ms = d.limit == Limit::none ? 0 : std::max<uint64_t>(1, uint64_t(v[1]));
    d.day = uint32_t(v[6]);
    const uint64_t to_midnight = uint64_t(v[7]);
    auto left = [](long long milli) { return milli <= 0 ? uint64_t(0) : uint64_t(milli / 1000); };
    // Until a bucket holding `milli` thousandths is whole again.
    auto until_full = [](uint64_t per_min, long long milli) -> uint64_t {
        const long long whole = (long long)(per_min)*1000;
        if (milli >= whole) return 0;
        return (uint64_t(whole - milli) * 60 + per_min - 1) / per_min;
    };
    Headroom& h = d.headroom;
    const uint64_t day_requests = uint64_t(std::max(0LL, v[4]));
    const uint64_t day_tokens = uint64_t(std::max(0LL, v[5]));
    if (budget.requests_per_min) {
        h.limit_requests = budget.requests_per_min;
        h.remaining_requests = left(v[2]);
        h.reset_requests_ms = until_full(budget.requests_per_min, v[2]);
    } else if (budget.requests_per_day) {
        h.limit_requests = budget.requests_per_day;
        h.remaining_requests = budget.requests_per_day - std::min(budget.requests_per_day, day_requests);
        h.reset_requests_ms = to_midnight;
    }
    if (budget.tokens_per_min) {
        h.limit_tokens = budget.tokens_per_min;
        h.remaining_tokens = left(v[3]);
        h.reset_tokens_ms = until_full(budget.tokens_per_min, v[3]);
    } else if (budget.tokens_per_day) {
        h.limit_tokens = budget.tokens_per_day;
        h.remaining_tokens = budget.tokens_per_day - std::min(budget.tokens_per_day, day_tokens);
        h.reset_tokens_ms = to_midnight;
    }
    return d;
}

}  // namespace dpgate::gateway::budget
