#include "gateway/budget/windows.hpp"

#include <algorithm>

namespace dpgate::gateway::budget {

namespace {

// One request or token in bucket units: a minute's worth of milliseconds.
constexpr int64_t kUnits = 60'000;

int64_t capacity(uint64_t per_min) { return int64_t(per_min) * kUnits; }

// How long until a bucket refilling at `per_min` holds `units` (now `level`).
uint64_t msUntil(int64_t units, int64_t level, uint64_t per_min) {
    if (level >= units || per_min == 0) return 0;
    return (uint64_t(units - level) + per_min - 1) / per_min;
}

uint64_t wholeUnits(int64_t level) { return level <= 0 ? 0 : uint64_t(level / kUnits); }

}  // namespace

std::string_view limitName(Limit limit) {
    switch (limit) {
        case Limit::none: return "none";
        case Limit::requests_per_min: return "requests_per_min";
        case Limit::requests_per_day: return "requests_per_day";
        case Limit::tokens_per_min: return "tokens_per_min";
        case Limit::tokens_per_day: return "tokens_per_day";
    }
    return "none";
}

Budget Budget::share(uint32_t ways) const {
    if (ways <= 1) return *this;
    auto part = [ways](uint64_t limit) { return limit == 0 ? 0 : std::max<uint64_t>(1, (limit + ways - 1) / ways); };
    return {part(requests_per_min), part(requests_per_day), part(tokens_per_min), part(tokens_per_day)};
}

void KeyWindows::advance(const Budget& budget, uint64_t now_ms, uint64_t unix_ms) {
    const int64_t request_cap = capacity(budget.requests_per_min);
    const int64_t token_cap = capacity(budget.tokens_per_min);
    if (!started_) {
        started_ = true;
        request_units_ = request_cap_ = request_cap;
        token_units_ = token_cap_ = token_cap;
        last_ms_ = now_ms;
    } else if (now_ms > last_ms_) {  // a clock that steps back refills nothing
        // A minute refills everything; capping first keeps the products small.
        const uint64_t elapsed = std::min<uint64_t>(now_ms - last_ms_, uint64_t(kUnits));
        request_units_ += int64_t(elapsed * budget.requests_per_min);
        token_units_ += int64_t(elapsed * budget.tokens_per_min);
        last_ms_ = now_ms;
    }
    // A larger budget (a reload, the store back from a share) adds what it
    // grew by, so a budget that was unlimited starts full; a smaller one
    // caps what is held.
    if (request_cap > request_cap_) request_units_ += request_cap - request_cap_;
    if (token_cap > token_cap_) token_units_ += token_cap - token_cap_;
    request_cap_ = request_cap;
    token_cap_ = token_cap;
    request_units_ = std::min(request_units_, request_cap);
    token_units_ = std::min(token_units_, token_cap);
    if (const uint32_t day = utcDay(unix_ms); day > day_) {
        day_ = day;
        day_requests_ = day_tokens_ = 0;
    }
}

Headroom KeyWindows::headroom(const Budget& budget, uint64_t unix_ms) const {
    Headroom h;
    if (budget.requests_per_min) {
        h.limit_requests = budget.requests_per_min;
        h.remaining_requests = wholeUnits(request_units_);
        h.reset_requests_ms = msUntil(capacity(budget.requests_per_min), request_units_, budget.requests_per_min);
    } else if (budget.requests_per_day) {
        h.limit_requests = budget.requests_per_day;
        h.remaining_requests = budget.requests_per_day - std::min(budget.requests_per_day, day_requests_);
        h.reset_requests_ms = msToMidnight(unix_ms);
    }
    if (budget.tokens_per_min) {
        h.limit_tokens = budget.tokens_per_min;
        h.remaining_tokens = wholeUnits(token_units_);
        h.reset_tokens_ms = msUntil(capacity(budget.tokens_per_min), token_units_, budget.tokens_per_min);
    } else if (budget.tokens_per_day) {
        h.limit_tokens = budget.tokens_per_day;
        h.remaining_tokens = budget.tokens_per_day - std::min(budget.tokens_per_day, day_tokens_);
        h.reset_tokens_ms = msToMidnight(unix_ms);
    }
    return h;
}

Decision KeyWindows::reserve(const Budget& budget, const Budget& whole, uint64_t tokens, uint64_t now_ms,
                             uint64_t unix_ms) {
    Decision d;
    // Larger than a whole window of the key's own budget: no wait helps.
    if ((whole.tokens_per_min && tokens > whole.tokens_per_min) ||
        (whole.tokens_per_day && tokens > whole.tokens_per_day)) {
        d.verdict = Verdict::never_fits;
        d.limit = whole.tokens_per_min && tokens > whole.tokens_per_min ? Limit::tokens_per_min : Limit::tokens_per_day;
    }
    const std::lock_guard lock(mutex_);
    advance(budget, now_ms, unix_ms);
    d.day = day_;
    auto refuse = [&](Limit limit, uint64_t wait_ms) {
        d.verdict = Verdict::limited;
        d.limit = limit;
        d.retry_after_ms = std::max<uint64_t>(1, wait_ms);
    };
    const int64_t token_need = int64_t(tokens) * kUnits;
    const int64_t token_cap = capacity(budget.tokens_per_min);
    if (d.verdict == Verdict::never_fits) {
    } else if (budget.requests_per_min && request_units_ < kUnits) {
        refuse(Limit::requests_per_min, msUntil(kUnits, request_units_, budget.requests_per_min));
    } else if (budget.requests_per_day && day_requests_ >= budget.requests_per_day) {
        refuse(Limit::requests_per_day, msToMidnight(unix_ms));
    } else if (budget.tokens_per_min && token_units_ < token_need && token_units_ < token_cap) {
        // More than the share holds goes once the bucket is full (below).
        refuse(Limit::tokens_per_min, msUntil(std::min(token_need, token_cap), token_units_, budget.tokens_per_min));
    } else if (budget.tokens_per_day && day_tokens_ + tokens > budget.tokens_per_day &&
               !(day_tokens_ == 0 && tokens > budget.tokens_per_day)) {
        refuse(Limit::tokens_per_day, msToMidnight(unix_ms));
    } else {
        if (budget.requests_per_min) request_units_ -= kUnits;
        if (budget.tokens_per_min) token_units_ -= token_need;
        ++day_requests_;
        day_tokens_ += tokens;
    }
    d.headroom = headroom(budget, unix_ms);
    return d;
}

void KeyWindows::charge(const Budget& budget, uint64_t tokens, uint64_t now_ms, uint64_t unix_ms) {
    const std::lock_guard lock(mutex_);
    advance(budget, now_ms, unix_ms);
    if (budget.requests_per_min) request_units_ -= kUnits;
    if (budget.tokens_per_min) token_units_ -= int64_t(tokens) * kUnits;
    ++day_requests_;
    day_tokens_ += tokens;
}

void KeyWindows::settle(const Budget& budget, int64_t refund, uint32_t day, uint64_t now_ms) {
    if (refund == 0) return;
    const std::lock_guard lock(mutex_);
    if (!started_) return;
    if (now_ms > last_ms_) {
        const uint64_t elapsed = std::min<uint64_t>(now_ms - last_ms_, uint64_t(kUnits));
        request_units_ += int64_t(elapsed * budget.requests_per_min);
        token_units_ += int64_t(elapsed * budget.tokens_per_min);
        last_ms_ = now_ms;
    }
    if (budget.tokens_per_min) token_units_ = std::min(token_units_ + refund * kUnits, capacity(budget.tokens_per_min));
    request_units_ = std::min(request_units_, capacity(budget.requests_per_min));
    if (day == day_) {
        if (refund > 0) day_tokens_ -= std::min(day_tokens_, uint64_t(refund));
        else day_tokens_ += uint64_t(-refund);
    }
}

uint64_t KeyWindows::requestsBlockedFor(const Budget& budget, uint64_t now_ms, uint64_t unix_ms) {
    if (!budget.requests_per_min && !budget.requests_per_day) return 0;
    const std::lock_guard lock(mutex_);
    advance(budget, now_ms, unix_ms);
    if (budget.requests_per_min && request_units_ < kUnits)
        return std::max<uint64_t>(1, msUntil(kUnits, request_units_, budget.requests_per_min));
    if (budget.requests_per_day && day_requests_ >= budget.requests_per_day) return msToMidnight(unix_ms);
    return 0;
}

KeyWindows::Today KeyWindows::today(uint64_t unix_ms) {
    const std::lock_guard lock(mutex_);
    if (const uint32_t day = utcDay(unix_ms); day > day_) {
        day_ = day;
        day_requests_ = day_tokens_ = 0;
    }
    return {day_, day_requests_, day_tokens_};
}

void KeyWindows::restoreDay(uint32_t day, uint64_t requests, uint64_t tokens, uint64_t unix_ms) {
    if (day != utcDay(unix_ms)) return;
    const std::lock_guard lock(mutex_);
    day_ = day;
    day_requests_ = requests;
    day_tokens_ = tokens;
}

}  // namespace dpgate::gateway::budget
