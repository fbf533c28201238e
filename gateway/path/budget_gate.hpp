// Where a request meets its key's budgets (gateway/budget/): from the head,
// a key out of requests is refused before its body is read; after
// admission, the request's exact tokens are reserved; when it ends, what it
// used is settled. Refusals say what clients act on: 429
// rate_limit_exceeded with Retry-After (and retry-after-ms) and OpenAI's
// x-ratelimit-* fields, which every answer of a budgeted key carries too;
// a request larger than a whole window gets 400 budget_exceeded, which no
// client retries.
#pragma once

#include "admission/verdict.hpp"
#include "gateway/budget/windows.hpp"
#include "gateway/net/net.hpp"
#include "gateway/path/request_context.hpp"

#include <cstdint>
#include <string>

namespace dpgate::gateway {

// The worker's record of the request's key (c.key must be set), looked up
// once per request.
KeyLocal& keyLocal(RequestContext& c);

// What a request reserves: its prompts (each of a completions request's),
// 1,024 per image, and the output budget of every sequence it makes.
uint64_t reservedTokens(const admission::Admitted& admitted);

// The x-ratelimit-* fields of `headroom` as head lines ("name: value\r\n"),
// and set on a response. A budget the key does not have is left out.
void appendRateLimitFields(std::string& head, const budget::Headroom& headroom);
void setRateLimitFields(http::response<http::string_body>& response, const budget::Headroom& headroom);

// OpenAI's reset durations: "20ms", "1s", "6m0s", "1h2m3s" (rounded up to
// the unit shown).
std::string resetDuration(uint64_t ms);

// From the head: false when the key's request budgets refuse it already
// (the refusal is then written by refuseBudget).
bool budgetAllowsHead(RequestContext& c, budget::Decision& decision);

// After admission: charges the request into `decision` (allowed: c.ticket
// holds the charge, c.headroom what is left). False when Redis must be
// asked: then co_await reserveBudgetShared() instead.
bool reserveBudgetNow(RequestContext& c, const admission::Admitted& admitted, budget::Decision& decision);
awaitable<void> reserveBudgetShared(RequestContext& c, const admission::Admitted& admitted, budget::Decision& decision);

// Writes the refusal of `decision` for a request of `tokens` (0: judged
// from its head).
awaitable<bool> refuseBudget(RequestContext& c, budget::Decision decision, uint64_t tokens);

// Settles the request's ticket when it ends: the backend's usage when it
// came, nothing when the answer was an error, else all that was reserved
// (a stream cut short: what it used is unknown). Counts the key's tokens.
void settleBudget(RequestContext& c);

}  // namespace dpgate::gateway
