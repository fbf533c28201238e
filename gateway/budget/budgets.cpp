#include "gateway/budget/budgets.hpp"

#include "gateway/budget/budget_scripts.hpp"
#include "gateway/metrics/sharded_count.hpp"
#include "gateway/platform/log.hpp"
#include "gateway/redis/redis_client.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace dpgate::gateway::budget {

namespace {

uint64_t steadyMs() {
    return uint64_t(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

uint64_t unixMs() {
    return uint64_t(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
}

Budget budgetOf(const conf::AuthKey& key) {
    return {key.requests_per_min, key.requests_per_day, key.tokens_per_min, key.tokens_per_day};
}

const redis::Script& reserveScript() {
    static const redis::Script script(kReserveScript);
    return script;
}

const redis::Script& settleScript() {
    static const redis::Script script(kSettleScript);
    return script;
}

constexpr const char* kDaysFile = "budget_days.json";

std::vector<std::string> reserveArgs(const Budget& b, uint64_t tokens) {
    return {std::to_string(b.requests_per_min), std::to_string(b.requests_per_day), std::to_string(b.tokens_per_min),
            std::to_string(b.tokens_per_day), std::to_string(tokens)};
}

void logUnexpected(const redis::Reply& reply) {
    std::string what = reply.kind == redis::Reply::Kind::error ? reply.str : std::string("an answer of another shape");
    logLine(LogLevel::warn, "budgets: Redis answered the reserve script with " + what.substr(0, 200));
}

}  // namespace

// What a key used, as its answers end: counted in cells per thread (no
// lock, no shared line on the request path) and sampled once a second by
// the Budgets' own thread for the last minute and today.
class UsageMeter {
public:
    void add(uint64_t tokens) {
        tokens_.addSaturating(tokens);
        requests_.addSaturating(1);
    }

    // Sampler thread only (under the Budgets' sample mutex).
    void sample(uint64_t second, uint32_t day) {
        const Totals now{tokens_.saturatedValue(), requests_.saturatedValue()};
        if (day != day_) {
            day_ = day;
            day_start_ = started_ ? now : Totals{};
        }
        started_ = true;
        ring_[second % ring_.size()] = {second, now};
    }
    struct Use {
        uint64_t minute_tokens = 0, minute_requests = 0, today_tokens = 0, today_requests = 0;
    };
    // From the samples: what the last 60 s and today added (this process).
    Use use(uint64_t second) const {
        const Totals now{tokens_.saturatedValue(), requests_.saturatedValue()};
        Totals base{};  // the oldest sample of the last minute (none: since the start)
        uint64_t oldest = UINT64_MAX;
        for (const Sample& s : ring_)
            if (s.second != 0 && s.second + 60 >= second && s.second < oldest) {
                oldest = s.second;
                base = s.totals;
            }
        return {now.tokens - std::min(now.tokens, base.tokens), now.requests - std::min(now.requests, base.requests),
                now.tokens - std::min(now.tokens, day_start_.tokens),
                now.requests - std::min(now.requests, day_start_.requests)};
    }

private:
    struct Totals {
        uint64_t tokens = 0, requests = 0;
    };
    struct Sample {
        uint64_t second = 0;
        Totals totals;
    };
    metrics::ShardedCount<uint64_t> tokens_;
    metrics::ShardedCount<uint64_t> requests_;
    std::array<Sample, 61> ring_{};
    Totals day_start_;
    uint32_t day_ = 0;
    bool started_ = false;
};

struct KeyState {
    std::string name;
    // Set by a reload while requests read them: each limit is its own atomic.
    std::atomic<uint64_t> requests_per_min{0}, requests_per_day{0}, tokens_per_min{0}, tokens_per_day{0};
    Budget budget() const {
        return {requests_per_min.load(std::memory_order_relaxed), requests_per_day.load(std::memory_order_relaxed),
                tokens_per_min.load(std::memory_order_relaxed), tokens_per_day.load(std::memory_order_relaxed)};
    }
    void set(const Budget& b) {
        requests_per_min.store(b.requests_per_min, std::memory_order_relaxed);
        requests_per_day.store(b.requests_per_day, std::memory_order_relaxed);
        tokens_per_min.store(b.tokens_per_min, std::memory_order_relaxed);
        tokens_per_day.store(b.tokens_per_day, std::memory_order_relaxed);
    }
    KeyWindows windows;
    UsageMeter usage;
    RedisKeys redis_keys;
    // From Redis's last refusal for a request budget (requests_per_min or
    // _day): until then (steady ms) the head is refused without asking.
    std::atomic<uint64_t> blocked_until_ms{0};
    std::atomic<uint8_t> blocked_limit{0};
};

// KEYS of both scripts.
std::vector<std::string> scriptKeys(const KeyState& key);

std::string describeBudgets(const conf::Config& config) {
    const conf::RedisConfig& redis = config.limits.redis;
    std::string out;
    if (redis.enabled()) {
        out = "budgets: shared through Redis " + redis.address + (redis.tls ? " (TLS)" : "") + ", key prefix \"" +
              redis.key_prefix + "\"; while it is away " +
              (config.limits.on_store_unavailable == conf::StoreFallback::deny
                   ? std::string("budgeted keys get 503 (on_store_unavailable: deny)")
                   : std::string("each replica keeps its share (on_store_unavailable: local)")) +
              "\n";
    } else {
        out = "budgets: in this process (no limits.redis): replicas do not share them; days " +
              (config.state.dir.empty() ? std::string("start again at a restart (no state.dir)")
                                        : "kept in " + config.state.dir + "/" + kDaysFile) +
              "\n";
    }
    size_t budgeted = 0;
    std::vector<std::string> warnings;
    const uint64_t output = config.model.max_output_tokens;
    for (const conf::AuthKey& key : config.auth.keys) {
        if (!key.budgeted()) continue;
        ++budgeted;
        for (auto [limit, name] :
             {std::pair{key.tokens_per_min, "tokens_per_min"}, std::pair{key.tokens_per_day, "tokens_per_day"}})
            if (limit != 0 && limit <= output)
                warnings.push_back("  !! key " + key.name + ": " + name + " " + std::to_string(limit) +
                                   " is not above the default output budget (model.max_output_tokens " +
                                   std::to_string(output) +
                                   "): every request without max_tokens is refused (400 budget_exceeded)");
    }
    out += "  " + std::to_string(budgeted) + " of " + std::to_string(config.auth.keys.size()) +
           " keys have budgets (requests/tokens per minute/day)\n";
    constexpr size_t kShown = 20;
    for (size_t i = 0; i < warnings.size() && i < kShown; ++i) out += warnings[i] + "\n";
    if (warnings.size() > kShown) out += "  !! and " + std::to_string(warnings.size() - kShown) + " more keys\n";
    return out;
}

Budgets::Budgets(const conf::Config& config, std::function<uint32_t()> replicas)
    : config_(config), replicas_(std::move(replicas)) {
    if (config_.limits.redis.enabled()) redis_ = std::make_unique<redis::RedisClient>(config_.limits.redis);
    update(config_);
}

Budgets::~Budgets() { stop(); }

void Budgets::update(const conf::Config& config) {
    deny_.store(config.limits.on_store_unavailable == conf::StoreFallback::deny, std::memory_order_relaxed);
    const std::unique_lock lock(keys_mutex_);
    for (const conf::AuthKey& key : config.auth.keys) {
        auto [at, added] = keys_.try_emplace(key.name);
        if (added) {
            at->second = std::make_unique<KeyState>();
            at->second->name = key.name;
            at->second->redis_keys = redisKeys(config_.limits.redis.key_prefix, key.name);
        }
        at->second->set(budgetOf(key));
    }
    // A key a reload removed keeps its state but no budget (it can no longer authenticate).
    for (auto& [name, state] : keys_) {
        const bool kept = std::any_of(config.auth.keys.begin(), config.auth.keys.end(),
                                      [&](const conf::AuthKey& key) { return key.name == name; });
        if (!kept) state->set({});
    }
}

KeyState* Budgets::find(std::string_view key_name) const {
    const std::shared_lock lock(keys_mutex_);
    const auto it = keys_.find(key_name);
    return it == keys_.end() ? nullptr : it->second.get();
}

void Budgets::start() {
    restore();
    sample();
    if (redis_) redis_->start();
    persist_thread_ = std::thread([this] { persistLoop(); });
}

void Budgets::stop() {
    {
        const std::lock_guard lock(persist_mutex_);
        if (stopping_) return;
        stopping_ = true;
    }
    persist_wake_.notify_all();
    if (persist_thread_.joinable()) persist_thread_.join();
    if (redis_) redis_->stop();
    persist();
}

bool Budgets::storeUp() const { return redis_ && redis_->reachable(); }

Decision Budgets::checkHead(KeyState* key) {
    Decision d;
    if (!key) return d;
    const Budget budget = key->budget();
    if (!budget.requests_per_min && !budget.requests_per_day) return d;
    const uint64_t now = steadyMs();
    if (redis_ && redis_->reachable()) {
        const uint64_t until = key->blocked_until_ms.load(std::memory_order_relaxed);
        if (until > now) {
            d.verdict = Verdict::limited;
            d.limit = Limit(key->blocked_limit.load(std::memory_order_relaxed));
            d.retry_after_ms = until - now;
        }
    } else {
        const Budget share = budget.share(redis_ ? replicas_() : 1);
        if (const uint64_t wait = key->windows.requestsBlockedFor(share, now, unixMs())) {
            d.verdict = Verdict::limited;
            d.limit = share.requests_per_min && wait <= 60'000 ? Limit::requests_per_min : Limit::requests_per_day;
            d.retry_after_ms = wait;
        }
    }
    // The request side of the headers: none left until the wait is over.
    if (d.verdict == Verdict::limited) {
        d.headroom.limit_requests =
            d.limit == Limit::requests_per_min ? budget.requests_per_min : budget.requests_per_day;
        d.headroom.reset_requests_ms = d.retry_after_ms;
    }
    return d;
}

Decision Budgets::reserveLocal(KeyState& key, uint64_t tokens, Ticket& ticket, bool share) {
    const Budget whole = key.budget();
    const Budget budget = share ? whole.share(replicas_()) : whole;
    Decision d = key.windows.reserve(budget, whole, tokens, steadyMs(), unixMs());
    if (d.verdict == Verdict::allowed) ticket = {&key, tokens, d.day, false, whole.any()};
    return d;
}

std::optional<Decision> Budgets::reserveNow(KeyState* key, uint64_t tokens, Ticket& ticket) {
    ticket = {};
    if (!key) return Decision{};
    const Budget whole = key->budget();
    if (!redis_ || !whole.any()) return reserveLocal(*key, tokens, ticket, false);
    // Never-fitting needs no store: the key's own budget says so.
    if ((whole.tokens_per_min && tokens > whole.tokens_per_min) ||
        (whole.tokens_per_day && tokens > whole.tokens_per_day))
        return reserveLocal(*key, tokens, ticket, false);
    if (redis_->reachable()) return std::nullopt;
    return storeAway(*key, tokens, ticket);
}

Decision Budgets::storeAway(KeyState& key, uint64_t tokens, Ticket& ticket) {
    fallbacks_.fetch_add(1, std::memory_order_relaxed);
    Decision d;
    if (deny_.load(std::memory_order_relaxed)) d.verdict = Verdict::unavailable;
    else d = reserveLocal(key, tokens, ticket, true);
    d.store_away = true;
    return d;
}

awaitable<Decision> Budgets::reserveShared(KeyState* key_state, uint64_t tokens, Ticket& ticket) {
    KeyState& key = *key_state;
    const Budget budget = key.budget();
    // Built before the co_await, in plain functions: GCC 12 mishandles
    // temporaries inside a co_await and braced lists in a coroutine's body.
    auto call = redis_->eval(reserveScript(), scriptKeys(key), reserveArgs(budget, tokens));
    const redis::Result result = co_await std::move(call);
    std::optional<Decision> decided;
    if (result.ok && result.reply.kind == redis::Reply::Kind::array) {
        std::vector<long long> values;
        for (const redis::Reply& element : result.reply.elements)
            if (element.kind == redis::Reply::Kind::integer) values.push_back(element.integer);
        decided = readReserveAnswer(values, budget);
    }
    if (!decided) {
        // Redis did not answer, or not as the script does: decide here.
        if (result.ok) logUnexpected(result.reply);
        co_return storeAway(key, tokens, ticket);
    }
    const uint64_t now = steadyMs();
    if (decided->verdict == Verdict::allowed) {
        ticket = {&key, tokens, decided->day, true, true};
        key.windows.charge(budget.share(replicas_()), tokens, now, unixMs());
    } else if (decided->limit == Limit::requests_per_min || decided->limit == Limit::requests_per_day) {
        key.blocked_limit.store(uint8_t(decided->limit), std::memory_order_relaxed);
        key.blocked_until_ms.store(now + decided->retry_after_ms, std::memory_order_relaxed);
    }
    co_return *decided;
}

void Budgets::settle(Ticket& ticket, uint64_t used) {
    KeyState* key = ticket.key;
    if (!key) return;
    ticket.key = nullptr;
    const uint64_t now = steadyMs();
    const int64_t refund = int64_t(ticket.reserved) - int64_t(used);
    const Budget budget = key->budget();
    const Budget local = ticket.shared || redis_ ? budget.share(replicas_()) : budget;
    key->windows.settle(local, refund, ticket.day, now);
    if (!ticket.shared || refund == 0) return;
    std::vector<std::string> keys{key->redis_keys.minute, key->redis_keys.day_prefix};
    std::vector<std::string> args{std::to_string(budget.requests_per_min), std::to_string(budget.tokens_per_min),
                                  std::to_string(refund), std::to_string(ticket.day)};
    redis_->evalThen(settleScript(), std::move(keys), std::move(args), [](const redis::Result&) {});
}

nlohmann::json Budgets::statusJson() const {
    nlohmann::json j;
    j["store"] = redis_ ? "redis" : "local";
    if (redis_) {
        j["address"] = config_.limits.redis.address;
        j["reachable"] = redis_->reachable();
        if (!redis_->reachable()) j["error"] = redis_->lastError();
        j["on_store_unavailable"] = deny_.load(std::memory_order_relaxed) ? "deny" : "local";
        // What this replica enforces alone while Redis is away.
        j["local_share"] = redis_->reachable() ? nlohmann::json(nullptr) : nlohmann::json(replicas_());
    }
    j["fallbacks"] = fallbacks();
    return j;
}

nlohmann::json Budgets::topKeysJson(size_t n) const {
    const uint64_t now = steadyMs();
    const uint64_t unix_now = unixMs();
    struct Row {
        std::string key;
        KeyWindows::Today today;
        uint64_t minute_tokens;
        uint64_t minute_requests;
    };
    std::vector<Row> rows;
    {
        const std::shared_lock lock(keys_mutex_);
        const std::lock_guard sampled(sample_mutex_);
        for (auto& [name, state] : keys_) {
            const UsageMeter::Use use = state->usage.use(now / 1000);
            KeyWindows::Today today{0, use.today_requests, use.today_tokens};
            if (state->budget().any()) today = state->windows.today(unix_now);
            rows.push_back({name, today, use.minute_tokens, use.minute_requests});
        }
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        return std::tie(b.today.tokens, b.minute_tokens, a.key) < std::tie(a.today.tokens, a.minute_tokens, b.key);
    });
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < rows.size() && i < n; ++i) {
        if (rows[i].today.tokens == 0 && rows[i].today.requests == 0 && rows[i].minute_requests == 0) break;
        out.push_back({{"key", rows[i].key},
                       {"tokens_today", rows[i].today.tokens},
                       {"requests_today", rows[i].today.requests},
                       {"tokens_last_minute", rows[i].minute_tokens},
                       {"requests_last_minute", rows[i].minute_requests}});
    }
    return out;
}

nlohmann::json Budgets::usageRow(KeyState& key, uint64_t now, uint64_t unix_now) const {
    const Budget budget = key.budget();
    UsageMeter::Use use;
    {
        const std::lock_guard sampled(sample_mutex_);
        use = key.usage.use(now / 1000);
    }
    KeyWindows::Today today{0, use.today_requests, use.today_tokens};
    if (budget.any()) today = key.windows.today(unix_now);
    const uint64_t minute_tokens = use.minute_tokens;
    const uint64_t minute_requests = use.minute_requests;
    nlohmann::json row;
    row["key"] = key.name;
    row["limits"] = {{"requests_per_min", budget.requests_per_min},
                     {"requests_per_day", budget.requests_per_day},
                     {"tokens_per_min", budget.tokens_per_min},
                     {"tokens_per_day", budget.tokens_per_day}};
    row["last_minute"] = {{"tokens", minute_tokens}, {"requests", minute_requests}};
    row["today"] = {{"tokens", today.tokens}, {"requests", today.requests}, {"scope", "replica"}};
    return row;
}

namespace {

uint64_t countOf(const redis::Reply& r) {
    if (r.kind != redis::Reply::Kind::string || r.str.empty() || r.str.size() > 19) return 0;
    uint64_t n = 0;
    for (char c : r.str) {
        if (c < '0' || c > '9') return 0;
        n = n * 10 + uint64_t(c - '0');
    }
    return n;
}

// The day's counts every replica shares, from HMGET r t; false when Redis
// did not answer so.
bool sharedToday(const redis::Result& result, nlohmann::json& row) {
    if (!result.ok || result.reply.kind != redis::Reply::Kind::array || result.reply.elements.size() != 2) return false;
    row["today"] = {{"tokens", countOf(result.reply.elements[1])},
                    {"requests", countOf(result.reply.elements[0])},
                    {"scope", "shared"}};
    return true;
}

std::vector<std::string> dayCountsCommand(const KeyState& key, uint32_t day) {
    return {"HMGET", key.redis_keys.day_prefix + std::to_string(day), "r", "t"};
}

}  // namespace

std::vector<std::string> scriptKeys(const KeyState& key) { return {key.redis_keys.minute, key.redis_keys.day_prefix}; }

awaitable<nlohmann::json> Budgets::usageJson() {
    const uint64_t now = steadyMs();
    const uint64_t unix_now = unixMs();
    std::vector<KeyState*> keys;
    {
        const std::shared_lock lock(keys_mutex_);
        for (auto& [name, state] : keys_) keys.push_back(state.get());
    }
    nlohmann::json rows = nlohmann::json::array();
    for (KeyState* key : keys) {
        nlohmann::json row = usageRow(*key, now, unix_now);
        if (redis_ && key->budget().any() && redis_->reachable()) {
            auto call = redis_->command(dayCountsCommand(*key, utcDay(unix_now)));
            const redis::Result shared = co_await std::move(call);
            sharedToday(shared, row);
        }
        rows.push_back(std::move(row));
    }
    co_return usageAnswer(std::move(rows), unix_now);
}

nlohmann::json Budgets::usageAnswer(nlohmann::json rows, uint64_t unix_now) const {
    nlohmann::json out;
    out["day"] = utcDay(unix_now);
    out["store"] = statusJson();
    out["keys"] = std::move(rows);
    return out;
}

void Budgets::recordUse(KeyState* key, uint64_t tokens) {
    if (key) key->usage.add(tokens);
}

void Budgets::sample() {
    const uint64_t second = steadyMs() / 1000;
    const uint32_t day = utcDay(unixMs());
    const std::shared_lock lock(keys_mutex_);
    const std::lock_guard sampled(sample_mutex_);
    for (auto& [name, state] : keys_) state->usage.sample(second, day);
}

// Once a second: the keys' use sampled; every fifth, today's counts written.
void Budgets::persistLoop() {
    std::unique_lock lock(persist_mutex_);
    for (unsigned tick = 1; !stopping_; ++tick) {
        persist_wake_.wait_for(lock, std::chrono::seconds(1));
        if (stopping_) break;
        lock.unlock();
        sample();
        if (tick % 5 == 0) persist();
        lock.lock();
    }
}

// Today's counts, so that a restart does not hand a key a fresh day.
void Budgets::persist() {
    if (config_.state.dir.empty()) return;
    const uint64_t unix_now = unixMs();
    nlohmann::json keys = nlohmann::json::object();
    {
        const std::shared_lock lock(keys_mutex_);
        for (auto& [name, state] : keys_) {
            const KeyWindows::Today today = state->windows.today(unix_now);
            if (today.requests || today.tokens) keys[name] = {{"requests", today.requests}, {"tokens", today.tokens}};
        }
    }
    nlohmann::json file;
    file["day"] = utcDay(unix_now);
    file["keys"] = std::move(keys);
    const std::filesystem::path path = std::filesystem::path(config_.state.dir) / kDaysFile;
    const std::filesystem::path temporary = path.string() + ".tmp";
    {
        std::ofstream out(temporary, std::ios::trunc);
        out << file.dump() << '\n';
        if (!out) {
            logLine(LogLevel::warn, "budgets: cannot write " + temporary.string());
            return;
        }
    }
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    if (ec) logLine(LogLevel::warn, "budgets: cannot write " + path.string() + ": " + ec.message());
}

void Budgets::restore() {
    if (config_.state.dir.empty()) return;
    const std::filesystem::path path = std::filesystem::path(config_.state.dir) / kDaysFile;
    std::ifstream in(path);
    if (!in) return;
    const nlohmann::json file = nlohmann::json::parse(in, nullptr, false);
    if (!file.is_object() || !file.contains("day") || !file["day"].is_number_unsigned() || !file.contains("keys") ||
        !file["keys"].is_object()) {
        logLine(LogLevel::warn, "budgets: ignoring " + path.string() + ": not what dpgate writes");
        return;
    }
    const uint32_t day = file["day"].get<uint32_t>();
    const uint64_t unix_now = unixMs();
    for (const auto& [name, counts] : file["keys"].items()) {
        KeyState* key = find(name);
        if (!key || !counts.is_object()) continue;
        auto count = [&counts](const char* field) {
            const auto it = counts.find(field);
            return it != counts.end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t(0);
        };
        key->windows.restoreDay(day, count("requests"), count("tokens"), unix_now);
    }
}

}  // namespace dpgate::gateway::budget
