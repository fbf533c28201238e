// Every key's budgets and usage: requests and tokens per minute and per UTC
// day (windows.hpp), reserved exactly at admission and settled from the
// backend's usage when the answer ends.
//
// Without limits.redis each process keeps its own windows (the days in
// state.dir, so a restart forgets nothing of today). With it, a budgeted
// key's reservation and settlement are one Lua script each in Redis
// (budget_scripts.hpp), atomic, so every replica draws on one budget. While
// Redis cannot be reached, limits.on_store_unavailable decides: `local`
// keeps each replica to its share of every budget (the budget divided by
// the live replicas the control store knows, else by 1) in its own
// windows; `deny` refuses budgeted keys with 503.
//
// Keys without budgets are not limited here, only counted (today's and the
// last minute's tokens, for `dpgate ctl usage`); they never wait on Redis.
#pragma once

#include "conf/config.hpp"
#include "gateway/budget/windows.hpp"
#include "gateway/net/net.hpp"

#include <nlohmann/json_fwd.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>

namespace dpgate::gateway::redis {
class RedisClient;
}

namespace dpgate::gateway::budget {

// One key's budget, windows and the last minute's use. Lives as long as the
// Budgets (a key a reload removes stays, unused).
struct KeyState;

// A request's charge, from reserve() to settle().
struct Ticket {
    KeyState* key = nullptr;
    uint64_t reserved = 0;  // tokens taken at admission
    uint32_t day = 0;       // the UTC day they were charged to
    bool shared = false;    // charged in Redis (else in this process's windows)
    bool budgeted = false;  // the key has budgets (else only counted)
};

// What `dpgate check` says about the budgets: where they are kept, how
// many keys have which, and every key whose per-minute or per-day tokens
// are below one default output budget (each request without max_tokens
// would be refused as never fitting).
std::string describeBudgets(const conf::Config& config);

class Budgets {
public:
    // `replicas`: how many replicas share the endpoint now (the live ones
    // the control store lists; 1 without one). Called on the worker that
    // falls back, so it must be cheap and thread-safe.
    Budgets(const conf::Config& config, std::function<uint32_t()> replicas);
    ~Budgets();
    Budgets(const Budgets&) = delete;
    Budgets& operator=(const Budgets&) = delete;

    // Reads today's counts from state.dir, starts the Redis client and the
    // thread that writes the days back.
    void start();
    void stop();

    // A reload: the keys' budgets as `config` sets them (usage is kept).
    void update(const conf::Config& config);

    // The key's state; null for a name never configured.
    KeyState* find(std::string_view key_name) const;

    // Before the body is read: a request the key's request budgets refuse
    // whatever its size (from this process's windows, or from what Redis
    // answered last). A decision with verdict limited, or allowed.
    Decision checkHead(KeyState* key);

    // At admission: charges `tokens` (prompt + images + the output budget
    // times n) and one request. Allowed: `ticket` holds the charge. Decided
    // at once unless Redis must be asked (nullopt): then reserveShared().
    std::optional<Decision> reserveNow(KeyState* key, uint64_t tokens, Ticket& ticket);
    awaitable<Decision> reserveShared(KeyState* key, uint64_t tokens, Ticket& ticket);

    // When any keyed answer ends (budgets or not): what it used, for the
    // key's last minute and today (`dpgate ctl usage`). Lock-free.
    void recordUse(KeyState* key, uint64_t tokens);

    // When the answer ends: `used` tokens (the backend's usage) of what the
    // ticket reserved; the rest goes back. Idempotent per ticket (it is
    // cleared). Runs on the caller's thread; a shared settle is sent to
    // Redis without waiting.
    void settle(Ticket& ticket, uint64_t used);

    // For /admin/status's "budgets": the store, its state, the fallback.
    nlohmann::json statusJson() const;
    // This replica's top `n` keys by today's tokens (those that used any),
    // for /admin/status and the status page.
    nlohmann::json topKeysJson(size_t n) const;
    // For /admin/usage: every key's limits and use now and today, this
    // replica's counts and (budgeted keys, with Redis) the shared ones.
    awaitable<nlohmann::json> usageJson();

    bool shared() const { return redis_ != nullptr; }
    // Whether budgeted keys are decided in Redis now (false while it is away).
    bool storeUp() const;
    // Reservations decided locally because Redis was away.
    uint64_t fallbacks() const { return fallbacks_.load(std::memory_order_relaxed); }

private:
    Decision reserveLocal(KeyState& key, uint64_t tokens, Ticket& ticket, bool share);
    // Redis is away or answered nonsense: this replica decides (or denies).
    Decision storeAway(KeyState& key, uint64_t tokens, Ticket& ticket);
    nlohmann::json usageRow(KeyState& key, uint64_t now, uint64_t unix_now) const;
    nlohmann::json usageAnswer(nlohmann::json rows, uint64_t unix_now) const;
    void sample();
    void persistLoop();
    void persist();
    void restore();

    conf::Config config_;  // the parts read here: limits, state.dir, auth
    std::function<uint32_t()> replicas_;
    std::unique_ptr<redis::RedisClient> redis_;
    mutable std::shared_mutex keys_mutex_;
    std::map<std::string, std::unique_ptr<KeyState>, std::less<>> keys_;
    std::atomic<uint64_t> fallbacks_{0};
    std::atomic<bool> deny_{false};  // limits.on_store_unavailable: deny (a reload may change it)

    mutable std::mutex sample_mutex_;  // the meters' samples
    std::mutex persist_mutex_;
    std::condition_variable persist_wake_;
    bool stopping_ = false;
    std::thread persist_thread_;
};

}  // namespace dpgate::gateway::budget
