// The budget scripts in a real redis-server (started by the suite), and the
// Budgets that run them: the same decisions as the windows in a process,
// one budget for two clients, what a settle gives back, and what happens
// while Redis is away.
#include "gateway/budget/budget_scripts.hpp"
#include "gateway/budget/budgets.hpp"
#include "gateway/redis/redis_client.hpp"
#include "redis/redis_server.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace dpgate::gateway::budget {
namespace {

using redis::RedisClient;
using redis::Result;
using redis::Script;
using redis::test::RedisServer;

conf::RedisConfig redisConfig(const RedisServer& server) {
    conf::RedisConfig config;
    config.address = server.address();
    config.key_prefix = "test:";
    config.timeout_ms = 1000;
    config.connect_timeout_ms = 1000;
    return config;
}

std::vector<long long> integers(const Result& result) {
    std::vector<long long> out;
    for (const redis::Reply& element : result.reply.elements) out.push_back(element.integer);
    return out;
}

Result runEval(RedisClient& client, const Script& script, std::vector<std::string> keys,
               std::vector<std::string> args) {
    net::io_context io;
    Result out;
    auto task = [&]() -> awaitable<void> {
        auto call = client.eval(script, std::move(keys), std::move(args));
        out = co_await std::move(call);
    };
    net::co_spawn(io, task(), net::detached);
    io.run();
    return out;
}

std::vector<std::string> reserveArgs(const Budget& b, uint64_t tokens) {
    return {std::to_string(b.requests_per_min), std::to_string(b.requests_per_day), std::to_string(b.tokens_per_min),
            std::to_string(b.tokens_per_day), std::to_string(tokens)};
}

std::optional<Decision> reserve(RedisClient& client, const RedisKeys& keys, const Budget& b, uint64_t tokens) {
    const Script script(kReserveScript);
    const Result result = runEval(client, script, {keys.minute, keys.day_prefix}, reserveArgs(b, tokens));
    EXPECT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.reply.kind, redis::Reply::Kind::array) << redis::describe(result.reply);
    return readReserveAnswer(integers(result), b);
}

void settle(RedisClient& client, const RedisKeys& keys, const Budget& b, int64_t refund, uint32_t day) {
    const Script script(kSettleScript);
    const Result result = runEval(client, script, {keys.minute, keys.day_prefix},
                                  {std::to_string(b.requests_per_min), std::to_string(b.tokens_per_min),
                                   std::to_string(refund), std::to_string(day)});
    ASSERT_TRUE(result.ok) << result.error;
    ASSERT_EQ(result.reply.kind, redis::Reply::Kind::integer) << redis::describe(result.reply);
}

class BudgetScripts : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new RedisServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        client_ = std::make_unique<RedisClient>(redisConfig(*server_));
        client_->start();
    }
    // A key of its own per test: the server is the suite's.
    RedisKeys keys() const {
        return redisKeys("test:", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    }
    static RedisServer* server_;
    std::unique_ptr<RedisClient> client_;
};
RedisServer* BudgetScripts::server_ = nullptr;

TEST_F(BudgetScripts, ReserveChargesAndRefusesWithTheWaitChargingNothing) {
    const Budget b{0, 0, 100'000, 0};
    std::optional<Decision> d = reserve(*client_, keys(), b, 60'000);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->verdict, Verdict::allowed);
    EXPECT_EQ(d->headroom.limit_tokens, 100'000u);
    EXPECT_GE(d->headroom.remaining_tokens, 40'000u);
    EXPECT_LE(d->headroom.remaining_tokens, 40'100u);  // Redis's clock runs on meanwhile
    d = reserve(*client_, keys(), b, 50'000);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->verdict, Verdict::limited);
    EXPECT_EQ(d->limit, Limit::tokens_per_min);
    // 10,000 tokens at 100,000 a minute: about 6 s.
    EXPECT_GT(d->retry_after_ms, 5'500u);
    EXPECT_LE(d->retry_after_ms, 6'000u);
    // The refusal charged nothing: 40,000 still fit.
    d = reserve(*client_, keys(), b, 40'000);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->verdict, Verdict::allowed);
}

TEST_F(BudgetScripts, SettleGivesTheUnusedPartBackToTheMinuteAndTheDay) {
    const Budget b{0, 0, 1'000, 5'000};
    std::optional<Decision> d = reserve(*client_, keys(), b, 900);
    ASSERT_TRUE(d && d->verdict == Verdict::allowed);
    EXPECT_EQ(reserve(*client_, keys(), b, 900)->verdict, Verdict::limited);
    settle(*client_, keys(), b, 850, d->day);  // it used 50
    d = reserve(*client_, keys(), b, 900);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->verdict, Verdict::allowed);
    // Minute reported (it is set); the day holds 50 + 900.
    EXPECT_EQ(d->headroom.limit_tokens, 1'000u);
    const Result day = runEval(*client_, Script("return redis.call('HGET', KEYS[1], 't')"),
                               {keys().day_prefix + std::to_string(d->day)}, {});
    EXPECT_EQ(day.reply.str, "950");
}

TEST_F(BudgetScripts, RequestsPerMinuteAndPerDay) {
    const Budget per_min{3, 0, 0, 0};
    for (int i = 0; i < 3; ++i) EXPECT_EQ(reserve(*client_, keys(), per_min, 0)->verdict, Verdict::allowed) << i;
    std::optional<Decision> d = reserve(*client_, keys(), per_min, 0);
    EXPECT_EQ(d->limit, Limit::requests_per_min);
    EXPECT_GT(d->retry_after_ms, 19'000u);  // a request every 20 s
    EXPECT_EQ(d->headroom.remaining_requests, 0u);

    const RedisKeys daily = redisKeys("test:", "daily-requests");
    const Budget per_day{0, 2, 0, 0};
    EXPECT_EQ(reserve(*client_, daily, per_day, 0)->verdict, Verdict::allowed);
    EXPECT_EQ(reserve(*client_, daily, per_day, 0)->verdict, Verdict::allowed);
    d = reserve(*client_, daily, per_day, 0);
    EXPECT_EQ(d->limit, Limit::requests_per_day);
    EXPECT_LE(d->retry_after_ms, 86'400'000u);
    EXPECT_EQ(d->headroom.remaining_requests, 0u);
}

TEST_F(BudgetScripts, TwoClientsDrawOnOneBudget) {
    RedisClient other(redisConfig(*server_));
    other.start();
    const Budget b{0, 0, 1'000, 0};
    EXPECT_EQ(reserve(*client_, keys(), b, 600)->verdict, Verdict::allowed);
    std::optional<Decision> d = reserve(other, keys(), b, 600);
    EXPECT_EQ(d->verdict, Verdict::limited);
    EXPECT_EQ(reserve(other, keys(), b, 400)->verdict, Verdict::allowed);
}

TEST_F(BudgetScripts, TheSameSequenceDecidesAsTheWindowsInAProcess) {
    // Budgets and requests whose decisions do not depend on a few ms of refill.
    const Budget b{5, 7, 10'000, 20'000};
    KeyWindows local;
    const uint64_t noon = 20'000ull * 86'400'000 + 43'200'000;
    const uint64_t sizes[] = {4'000, 4'000, 4'000, 1'000, 500, 100, 9'000, 10, 10, 10};
    for (size_t i = 0; i < std::size(sizes); ++i) {
        const Decision mine = local.reserve(b, b, sizes[i], 0, noon);
        if (mine.verdict == Verdict::never_fits) continue;
        const std::optional<Decision> shared = reserve(*client_, keys(), b, sizes[i]);
        ASSERT_TRUE(shared);
        EXPECT_EQ(shared->verdict, mine.verdict) << i;
        EXPECT_EQ(shared->limit, mine.limit) << i;
    }
}

TEST(BudgetScriptAnswers, AnythingButTheScriptsShapeIsRefused) {
    const Budget b{1, 0, 10, 0};
    EXPECT_FALSE(readReserveAnswer({}, b));
    EXPECT_FALSE(readReserveAnswer({0, 0, 0, 0, 0, 0, 0}, b));
    EXPECT_FALSE(readReserveAnswer({5, 0, 0, 0, 0, 0, 0, 0}, b));
    EXPECT_FALSE(readReserveAnswer({1, -1, 0, 0, 0, 0, 0, 0}, b));
    std::optional<Decision> d = readReserveAnswer({3, 0, 500, 2'500, 1, 7, 20'000, 1000}, b);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->verdict, Verdict::limited);
    EXPECT_EQ(d->retry_after_ms, 1u);  // at least 1 ms
    EXPECT_EQ(d->headroom.remaining_tokens, 2u);
    EXPECT_EQ(d->headroom.remaining_requests, 0u);
    EXPECT_EQ(d->headroom.reset_tokens_ms, 45'000u);  // 7.5 tokens at 10 a minute
}

// Budgets itself, with Redis and then without it.
conf::Config sharedConfig(const RedisServer& server, conf::StoreFallback fallback) {
    conf::Config config;
    config.limits.redis = redisConfig(server);
    config.limits.on_store_unavailable = fallback;
    conf::AuthKey key;
    key.name = "team";
    key.sha256 = std::string(64, 'a');
    key.requests_per_min = 4;
    config.auth.keys.push_back(key);
    return config;
}

Decision reserveThrough(Budgets& budgets, KeyState* key, Ticket& ticket) {
    if (std::optional<Decision> now = budgets.reserveNow(key, 10, ticket)) return *now;
    net::io_context io;
    Decision out;
    auto task = [&]() -> awaitable<void> {
        auto call = budgets.reserveShared(key, 10, ticket);
        out = co_await std::move(call);
    };
    net::co_spawn(io, task(), net::detached);
    io.run();
    return out;
}

TEST(BudgetsWithRedis, DecideInRedisThenAloneOrNotAtAllWhileItIsAway) {
    RedisServer server;
    for (conf::StoreFallback fallback : {conf::StoreFallback::local, conf::StoreFallback::deny}) {
        Budgets budgets(sharedConfig(server, fallback), [] { return 2u; });
        budgets.start();
        KeyState* key = budgets.find("team");
        ASSERT_NE(key, nullptr);
        Ticket ticket;
        EXPECT_FALSE(budgets.reserveNow(key, 10, ticket)) << "Redis is up: it decides";
        const Decision d = reserveThrough(budgets, key, ticket);
        EXPECT_EQ(d.verdict, Verdict::allowed);
        EXPECT_FALSE(d.store_away);
        EXPECT_TRUE(ticket.shared);
        budgets.settle(ticket, 10);
        budgets.stop();
    }
    server.kill();
    {
        Budgets budgets(sharedConfig(server, conf::StoreFallback::local), [] { return 2u; });
        budgets.start();
        KeyState* key = budgets.find("team");
        Ticket ticket;
        // Its share of 4 a minute between 2 replicas: 2.
        EXPECT_EQ(reserveThrough(budgets, key, ticket).verdict, Verdict::allowed);
        const Decision second = reserveThrough(budgets, key, ticket);
        EXPECT_EQ(second.verdict, Verdict::allowed);
        EXPECT_TRUE(second.store_away);
        EXPECT_FALSE(ticket.shared);
        EXPECT_EQ(reserveThrough(budgets, key, ticket).verdict, Verdict::limited);
        EXPECT_EQ(budgets.fallbacks(), 3u);
        budgets.stop();
    }
    {
        Budgets budgets(sharedConfig(server, conf::StoreFallback::deny), [] { return 2u; });
        budgets.start();
        Ticket ticket;
        const Decision d = reserveThrough(budgets, budgets.find("team"), ticket);
        EXPECT_EQ(d.verdict, Verdict::unavailable);
        EXPECT_EQ(ticket.key, nullptr);
        budgets.stop();
    }
}

}  // namespace
}  // namespace dpgate::gateway::budget
