#include "gateway/path/budget_gate.hpp"

#include "gateway/http/head_writer.hpp"
#include "gateway/path/answer.hpp"
#include "gateway/path/path_parts.hpp"

#include <charconv>

namespace dpgate::gateway {

namespace {

using namespace std::string_view_literals;

constexpr uint64_t kImageTokens = 1024;  // what admission reserves per image

std::string thousands(uint64_t n) {
    const std::string digits = std::to_string(n);
    std::string out;
    out.reserve(digits.size() + digits.size() / 3);
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
        out.push_back(digits[i]);
    }
    return out;
}

// "2s", "6m0s": seconds rounded up.
std::string retryPhrase(uint64_t ms) { return resetDuration(ms < 1000 ? ms : (ms + 999) / 1000 * 1000); }

std::string_view perWhat(budget::Limit limit) {
    switch (limit) {
        case budget::Limit::requests_per_min: return "requests per minute";
        case budget::Limit::requests_per_day: return "requests per day (UTC)";
        case budget::Limit::tokens_per_min: return "tokens per minute";
        case budget::Limit::tokens_per_day: return "tokens per day (UTC)";
        case budget::Limit::none: break;
    }
    return "requests";
}

uint64_t limitValue(const auth::KeyInfo& info, budget::Limit limit) {
    switch (limit) {
        case budget::Limit::requests_per_min: return info.requests_per_min;
        case budget::Limit::requests_per_day: return info.requests_per_day;
        case budget::Limit::tokens_per_min: return info.tokens_per_min;
        case budget::Limit::tokens_per_day: return info.tokens_per_day;
        case budget::Limit::none: break;
    }
    return 0;
}

ApiError refusalOf(const RequestContext& c, const budget::Decision& d, uint64_t tokens) {
    const std::string key = c.key ? c.key->name : std::string();
    const uint64_t limit = c.key ? limitValue(*c.key, d.limit) : 0;
    switch (d.verdict) {
        case budget::Verdict::never_fits: {
            ApiError error = ApiError::badRequest(
                "This request reserves " + thousands(tokens) +
                    " tokens (its prompt, 1,024 per image and its output budget: max_tokens, or the default, times "
                    "n), more than key '" +
                    key + "' may use in a whole " + (d.limit == budget::Limit::tokens_per_day ? "day" : "minute") +
                    " (" + std::string(budget::limitName(d.limit)) + ": " + thousands(limit) +
                    "). It can never be served under this key's rate limit: lower max_tokens or shorten the prompt.",
                "budget_exceeded");
            return error;
        }
        case budget::Verdict::unavailable:
            return ApiError::unavailable(
                "The rate-limit store is unavailable and key '" + key +
                    "' has budgets (limits.on_store_unavailable: deny). Try again in a moment.",
                "budget_store_unavailable", "server_error");
        default: break;
    }
    std::string message =
        "Rate limit reached for key '" + key + "' on " + std::string(perWhat(d.limit)) + ": limit " + thousands(limit);
    if (tokens > 0 && (d.limit == budget::Limit::tokens_per_min || d.limit == budget::Limit::tokens_per_day))
        message += ", this request reserves " + thousands(tokens) + " (prompt, images and output budget)";
    message += ". Please try again in " + retryPhrase(d.retry_after_ms) + ".";
    return ApiError::rateLimited(std::move(message));
}

std::string_view refusedLimit(const budget::Decision& d) {
    if (d.verdict == budget::Verdict::never_fits) return "never_fits";
    if (d.verdict == budget::Verdict::unavailable) return "store_unavailable";
    return budget::limitName(d.limit);
}

}  // namespace

uint64_t reservedTokens(const admission::Admitted& a) {
    // A completions request's prompts each go once; prompt_tokens is the longest.
    const uint64_t prompts = a.n == 0 ? 1 : std::max<uint64_t>(1, a.sequences / a.n);
    return a.prompt_tokens * prompts + uint64_t(a.images) * kImageTokens + a.output_budget * a.sequences;
}

std::string resetDuration(uint64_t ms) {
    if (ms < 1000) return std::to_string(ms) + "ms";
    uint64_t seconds = (ms + 999) / 1000;
    std::string out;
    if (seconds >= 3600) {
        out += std::to_string(seconds / 3600) + "h";
        seconds %= 3600;
        out += std::to_string(seconds / 60) + "m";
        seconds %= 60;
    } else if (seconds >= 60) {
        out += std::to_string(seconds / 60) + "m";
        seconds %= 60;
    }
    return out + std::to_string(seconds) + "s";
}

void appendRateLimitFields(std::string& head, const budget::Headroom& h) {
    if (h.limit_requests) {
        head.append("x-ratelimit-limit-requests: ").append(std::to_string(h.limit_requests));
        head.append("\r\nx-ratelimit-remaining-requests: ").append(std::to_string(h.remaining_requests));
        head.append("\r\nx-ratelimit-reset-requests: ").append(resetDuration(h.reset_requests_ms)).append("\r\n");
    }
    if (h.limit_tokens) {
        head.append("x-ratelimit-limit-tokens: ").append(std::to_string(h.limit_tokens));
        head.append("\r\nx-ratelimit-remaining-tokens: ").append(std::to_string(h.remaining_tokens));
        head.append("\r\nx-ratelimit-reset-tokens: ").append(resetDuration(h.reset_tokens_ms)).append("\r\n");
    }
}

void setRateLimitFields(http::response<http::string_body>& response, const budget::Headroom& h) {
    if (h.limit_requests) {
        response.set("x-ratelimit-limit-requests", std::to_string(h.limit_requests));
        response.set("x-ratelimit-remaining-requests", std::to_string(h.remaining_requests));
        response.set("x-ratelimit-reset-requests", resetDuration(h.reset_requests_ms));
    }
    if (h.limit_tokens) {
        response.set("x-ratelimit-limit-tokens", std::to_string(h.limit_tokens));
        response.set("x-ratelimit-remaining-tokens", std::to_string(h.remaining_tokens));
        response.set("x-ratelimit-reset-tokens", resetDuration(h.reset_tokens_ms));
    }
}

KeyLocal& keyLocal(RequestContext& c) {
    if (!c.key_local) c.key_local = &c.local.keyLocal(c.key->name, c.shared.budgets);
    return *c.key_local;
}

bool budgetAllowsHead(RequestContext& c, budget::Decision& decision) {
    // A key without budgets is only counted, when its answer ends.
    if (!c.key || !c.key->budgeted()) return true;
    c.budget_key = keyLocal(c).state;
    decision = c.shared.budgets.checkHead(c.budget_key);
    return decision.verdict == budget::Verdict::allowed;
}

bool reserveBudgetNow(RequestContext& c, const admission::Admitted& admitted, budget::Decision& decision) {
    std::optional<budget::Decision> now = c.shared.budgets.reserveNow(c.budget_key, reservedTokens(admitted), c.ticket);
    if (!now) return false;
    decision = *now;
    if (decision.store_away && c.metrics) c.metrics->budget_local_decisions.inc();
    if (decision.verdict == budget::Verdict::allowed && c.ticket.budgeted) c.headroom = decision.headroom;
    return true;
}

awaitable<void> reserveBudgetShared(RequestContext& c, const admission::Admitted& admitted,
                                    budget::Decision& decision) {
    const uint64_t tokens = reservedTokens(admitted);
    decision = co_await c.shared.budgets.reserveShared(c.budget_key, tokens, c.ticket);
    if (decision.store_away && c.metrics) c.metrics->budget_local_decisions.inc();
    if (decision.verdict == budget::Verdict::allowed && c.ticket.budgeted) c.headroom = decision.headroom;
}

awaitable<bool> refuseBudget(RequestContext& c, budget::Decision decision, uint64_t tokens) {
    const ApiError error = refusalOf(c, decision, tokens);
    if (c.metrics && c.key) c.metrics->key_rate_limited.with({c.key->name, refusedLimit(decision)}).inc();
    http::response<http::string_body> response = errorResponse(c, error, c.keep_alive);
    setRateLimitFields(response, decision.headroom);
    if (decision.verdict == budget::Verdict::limited) {
        response.set(http::field::retry_after,
                     std::to_string(std::max<uint64_t>(1, (decision.retry_after_ms + 999) / 1000)));
        response.set("retry-after-ms", std::to_string(decision.retry_after_ms));
        // A day's budget comes back at midnight: an SDK that honours
        // Retry-After would sleep for hours; it should fail now instead.
        if (decision.retry_after_ms > 60'000) response.set("x-should-retry", "false");
    } else if (decision.verdict == budget::Verdict::unavailable) {
        response.set(http::field::retry_after, "1");
    } else {
        response.set("x-should-retry", "false");
    }
    AnswerOutcome outcome;
    outcome.rejection = error.code;
    const bool written = co_await writeAnswer(c, response, outcome);
    co_return written&& response.keep_alive();
}

void settleBudget(RequestContext& c) {
    if (!c.key) return;
    budget::Ticket& ticket = c.ticket;
    const std::optional<Usage>& usage = c.record.usage;
    const uint64_t reserved = ticket.key ? ticket.reserved : 0;
    // The backend's usage; none for an error answer (nothing was generated
    // for the client); all that was reserved for a stream cut short.
    uint64_t used = reserved;
    if (usage) used = usage->prompt_tokens + usage->completion_tokens;
    else if (c.record.status >= 400) used = 0;
    KeyLocal& m = keyLocal(c);
    if (ticket.key) c.shared.budgets.settle(ticket, used);
    c.shared.budgets.recordUse(m.state, used);
    if (!c.metrics) return;
    if (usage) {
        m.prompt_tokens->inc(usage->prompt_tokens);
        m.cached_tokens->inc(usage->cached_prompt_tokens);
        m.completion_tokens->inc(usage->completion_tokens);
    }
    if (used < reserved) m.reserved_unused->inc(reserved - used);
}

}  // namespace dpgate::gateway
