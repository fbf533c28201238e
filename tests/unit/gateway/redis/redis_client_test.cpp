// The Redis client against a real redis-server: round trips, pipelining
// from many threads, scripts (and their reload after SCRIPT FLUSH), Redis's
// refusals, deadlines, a server that dies or freezes and comes back,
// passwords and TLS.
#include "gateway/redis/redis_client.hpp"

#include "redis_server.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace dpgate::gateway::redis {
namespace {

using test::RedisServer;
using test::TempDir;
using Clock = std::chrono::steady_clock;

conf::RedisConfig configFor(const RedisServer& server) {
    conf::RedisConfig config;
    config.address = server.address();
    config.timeout_ms = 1000;
    config.connect_timeout_ms = 1000;
    return config;
}

// One command, awaited by a coroutine on an io_context of the test's own.
// (The awaitable is built before the co_await, in a named local: GCC 12
// mishandles temporaries inside a co_await expression.)
Result run(RedisClient& client, std::vector<std::string> argv) {
    net::io_context io;
    Result out;
    auto task = [&]() -> awaitable<void> {
        auto call = client.command(std::move(argv));
        out = co_await std::move(call);
    };
    net::co_spawn(io, task(), net::detached);
    io.run();
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

// Built outside the coroutines: GCC 12 mishandles braced temporaries in them.
std::vector<std::string> echo(const std::string& text) { return {"ECHO", text}; }

int64_t elapsedMs(Clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

// Waits up to `limit_ms` for `condition`; whether it came.
template <class Condition>
bool eventually(Condition condition, int64_t limit_ms) {
    const auto start = Clock::now();
    while (!condition()) {
        if (elapsedMs(start) > limit_ms) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

class RedisClientTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new RedisServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static RedisServer* server_;
};
RedisServer* RedisClientTest::server_ = nullptr;

TEST_F(RedisClientTest, RoundTripsCommandsAndBinaryValues) {
    RedisClient client(configFor(*server_));
    client.start();
    EXPECT_TRUE(client.reachable()) << client.lastError();
    const std::string value("v\0\r\n\xff", 5);
    Result set = run(client, {"SET", "dpgate:test:binary", value});
    ASSERT_TRUE(set.ok) << set.error;
    EXPECT_EQ(set.reply.kind, Reply::Kind::status);
    EXPECT_EQ(set.reply.str, "OK");
    Result get = run(client, {"GET", "dpgate:test:binary"});
    ASSERT_TRUE(get.ok) << get.error;
    EXPECT_EQ(get.reply.kind, Reply::Kind::string);
    EXPECT_EQ(get.reply.str, value);
    EXPECT_EQ(run(client, {"GET", "dpgate:test:absent"}).reply.kind, Reply::Kind::nil);
    Result incr = run(client, {"INCRBY", "dpgate:test:n", "-5"});
    EXPECT_EQ(incr.reply.kind, Reply::Kind::integer);
    EXPECT_EQ(incr.reply.integer, -5);
    Result list = run(client, {"MGET", "dpgate:test:n", "dpgate:test:absent"});
    ASSERT_EQ(list.reply.kind, Reply::Kind::array);
    EXPECT_EQ(describe(list.reply), "[\"-5\", (nil)]");
    EXPECT_EQ(client.reconnects(), 0u);
}

TEST_F(RedisClientTest, RedisRefusalsAreAnswersOfKindError) {
    RedisClient client(configFor(*server_));
    client.start();
    Result unknown = run(client, {"NO-SUCH-COMMAND", "x"});
    ASSERT_TRUE(unknown.ok) << unknown.error;
    EXPECT_EQ(unknown.reply.kind, Reply::Kind::error);
    EXPECT_TRUE(unknown.reply.str.starts_with("ERR unknown command")) << unknown.reply.str;
    run(client, {"SET", "dpgate:test:text", "abc"});
    Result wrong = run(client, {"INCR", "dpgate:test:text"});
    ASSERT_TRUE(wrong.ok);
    EXPECT_EQ(wrong.reply.kind, Reply::Kind::error);
    // The connection goes on: the refusal was matched to its own command.
    EXPECT_EQ(run(client, {"ECHO", "after"}).reply.str, "after");
    EXPECT_TRUE(client.reachable());
}

TEST_F(RedisClientTest, PipelinesCommandsFromManyThreadsInOrder) {
    RedisClient client(configFor(*server_));
    client.start();
    constexpr int kThreads = 4, kCoroutines = 50, kEach = 40;
    std::atomic<int> matched{0}, failed{0}, elsewhere{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            net::io_context io;
            const std::thread::id self = std::this_thread::get_id();
            // Outlives its coroutines (they run in io.run() below), which
            // reach `t`, `self` and the counters through it.
            auto task = [&](int c) -> awaitable<void> {
                for (int i = 0; i < kEach; ++i) {
                    const std::string text = std::to_string(t) + "/" + std::to_string(c) + "/" + std::to_string(i);
                    std::vector<std::string> argv = echo(text);
                    auto call = client.command(std::move(argv));
                    Result result = co_await std::move(call);
                    if (std::this_thread::get_id() != self) ++elsewhere;
                    if (!result.ok) ++failed;
                    else if (result.reply.str == text) ++matched;
                }
            };
            for (int c = 0; c < kCoroutines; ++c) net::co_spawn(io, task(c), net::detached);
            io.run();
        });
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(failed.load(), 0) << client.lastError();
    EXPECT_EQ(elsewhere.load(), 0);  // each resumed on its own thread
    EXPECT_EQ(matched.load(), kThreads * kCoroutines * kEach);
}

TEST_F(RedisClientTest, AwaitsFromACoroutineOnAnyExecutor) {
    RedisClient client(configFor(*server_));
    client.start();
    net::io_context io;
    Result out;
    auto task = [&]() -> net::awaitable<void> {  // any_io_executor
        std::vector<std::string> argv = echo("any");
        auto call = client.command<net::any_io_executor>(std::move(argv));
        out = co_await std::move(call);
    };
    net::co_spawn(io, task(), net::detached);
    io.run();
    ASSERT_TRUE(out.ok) << out.error;
    EXPECT_EQ(out.reply.str, "any");
}

TEST_F(RedisClientTest, RunsScriptsBySha1AndReloadsThemAfterAFlush) {
    RedisClient client(configFor(*server_));
    client.start();
    const Script script("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    Result loaded = run(client, {"SCRIPT", "LOAD", script.source()});
    ASSERT_TRUE(loaded.ok);
    EXPECT_EQ(loaded.reply.str, script.sha1());  // Redis names it as we do

    run(client, {"DEL", "dpgate:test:budget"});
    Result first = runEval(client, script, {"dpgate:test:budget"}, {"7"});
    ASSERT_TRUE(first.ok) << first.error;
    EXPECT_EQ(first.reply.kind, Reply::Kind::integer);
    EXPECT_EQ(first.reply.integer, 7);

    ASSERT_EQ(run(client, {"SCRIPT", "FLUSH"}).reply.str, "OK");
    EXPECT_EQ(describe(run(client, {"SCRIPT", "EXISTS", script.sha1()}).reply), "[0]");
    Result again = runEval(client, script, {"dpgate:test:budget"}, {"5"});
    ASSERT_TRUE(again.ok) << again.error;
    EXPECT_EQ(again.reply.integer, 12);  // ran once after the reload, not twice
    EXPECT_EQ(describe(run(client, {"SCRIPT", "EXISTS", script.sha1()}).reply), "[1]");

    // A script's own error is Redis's answer, not a missing script.
    const Script broken("return redis.call('NO-SUCH-COMMAND')");
    Result refused = runEval(client, broken, {}, {});
    ASSERT_TRUE(refused.ok) << refused.error;
    EXPECT_EQ(refused.reply.kind, Reply::Kind::error);
    EXPECT_FALSE(refused.reply.str.starts_with("NOSCRIPT")) << refused.reply.str;
}

TEST_F(RedisClientTest, EvalThenCallsBackOnTheClientsThread) {
    RedisClient client(configFor(*server_));
    client.start();
    const Script script("return {KEYS[1], ARGV[1], 3}");
    std::promise<std::pair<Result, std::thread::id>> done;
    client.evalThen(script, {"k"}, {"a"}, [&](Result result) {
        done.set_value({std::move(result), std::this_thread::get_id()});
    });
    auto future = done.get_future();
    ASSERT_EQ(future.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    auto [result, thread] = future.get();
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(describe(result.reply), "[\"k\", \"a\", 3]");
    EXPECT_NE(thread, std::this_thread::get_id());
}

TEST_F(RedisClientTest, FailsCommandsWhenNotRunning) {
    RedisClient client(configFor(*server_));
    EXPECT_FALSE(run(client, {"PING"}).ok);  // not started
    client.start();
    EXPECT_TRUE(run(client, {"PING"}).ok);
    client.stop();
    Result after = run(client, {"PING"});
    EXPECT_FALSE(after.ok);
    EXPECT_EQ(after.error, "redis client not running");
}

TEST(RedisClientFailures, ATimeoutFailsEveryWaitingCommandAndTheClientRecovers) {
    RedisServer server;
    conf::RedisConfig config = configFor(server);
    config.timeout_ms = 200;
    RedisClient client(config);
    client.start();
    ASSERT_TRUE(run(client, {"PING"}).ok);

    server.pause();
    const auto sent = Clock::now();
    std::vector<std::future<Result>> waiting;
    for (int i = 0; i < 3; ++i)
        waiting.push_back(std::async(std::launch::async, [&] { return run(client, {"PING"}); }));
    for (auto& w : waiting) {
        Result result = w.get();
        EXPECT_FALSE(result.ok);
        EXPECT_EQ(result.error, "redis: no answer within 200 ms");
    }
    EXPECT_LT(elapsedMs(sent), 1000);
    EXPECT_FALSE(client.reachable());
    // While it does not answer, a command fails at once instead of waiting.
    const auto fast = Clock::now();
    Result unreachable = run(client, {"PING"});
    EXPECT_FALSE(unreachable.ok);
    EXPECT_TRUE(unreachable.error.starts_with("redis unreachable: ")) << unreachable.error;
    EXPECT_LT(elapsedMs(fast), 100);

    server.resume();
    EXPECT_TRUE(eventually([&] { return client.reachable(); }, 3000)) << client.lastError();
    Result back = run(client, {"PING"});
    EXPECT_TRUE(back.ok) << back.error;
    EXPECT_GE(client.reconnects(), 1u);
}

TEST(RedisClientFailures, AKilledServerFailsFastAndARestartedOneIsUsedAgain) {
    RedisServer server;
    RedisClient client(configFor(server));
    client.start();
    ASSERT_TRUE(run(client, {"SET", "dpgate:test:k", "1"}).ok);

    server.kill();
    EXPECT_TRUE(eventually([&] { return !client.reachable(); }, 1000));
    EXPECT_FALSE(client.lastError().empty());
    const auto start = Clock::now();
    for (int i = 0; i < 20; ++i) {
        Result result = run(client, {"GET", "dpgate:test:k"});
        EXPECT_FALSE(result.ok);
        EXPECT_TRUE(result.error.starts_with("redis unreachable: ")) << result.error;
    }
    EXPECT_LT(elapsedMs(start), 200);  // twenty, none waiting on a connect

    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the backoff at its longest
    server.start();
    const auto restarted = Clock::now();
    EXPECT_TRUE(eventually([&] { return client.reachable(); }, 2000)) << client.lastError();
    EXPECT_LT(elapsedMs(restarted), 2000);
    Result set = run(client, {"SET", "dpgate:test:k", "2"});
    EXPECT_TRUE(set.ok) << set.error;
    EXPECT_EQ(client.reconnects(), 1u);
}

TEST(RedisClientFailures, AConnectThatGetsNoAnswerGivesUpAfterConnectTimeout) {
    RedisServer server;
    server.pause();  // the kernel accepts; nothing answers PING
    conf::RedisConfig config = configFor(server);
    config.connect_timeout_ms = 300;
    RedisClient client(config);
    const auto start = Clock::now();
    client.start();
    EXPECT_LT(elapsedMs(start), 1500);
    EXPECT_FALSE(client.reachable());
    EXPECT_NE(client.lastError().find("no answer within 300 ms (connect_timeout_ms)"), std::string::npos)
        << client.lastError();
    server.resume();
    EXPECT_TRUE(eventually([&] { return client.reachable(); }, 3000)) << client.lastError();
    EXPECT_TRUE(run(client, {"PING"}).ok);
}

TEST(RedisClientFailures, BoundsTheCommandsWaiting) {
    RedisServer server;
    conf::RedisConfig config = configFor(server);
    config.timeout_ms = 20000;
    RedisClient client(config);
    client.start();
    const Script script("return 1");
    ASSERT_TRUE(run(client, {"SCRIPT", "LOAD", script.source()}).ok);
    server.pause();
    std::atomic<int> refused{0}, answered{0};
    std::string refusal;
    std::mutex mutex;
    for (int i = 0; i < 100'010; ++i)
        client.evalThen(script, {}, {}, [&](Result result) {
            if (result.ok) return void(++answered);
            std::lock_guard lock(mutex);
            ++refused;
            refusal = result.error;
        });
    // Ten over the bound; one more when a PING took a place meanwhile.
    EXPECT_GE(refused.load(), 10);
    EXPECT_LE(refused.load(), 11);
    EXPECT_EQ(refusal, "redis: 100000 commands already waiting");
    server.resume();
    const int expected = 100'010 - refused.load();
    EXPECT_TRUE(eventually([&] { return answered.load() == expected; }, 15000)) << answered.load();
}

TEST(RedisClientAuth, AuthenticatesWithAPasswordAndNamesAuthWhenItIsWrong) {
    RedisServer server({.password = "s3cret", .tls = nullptr});
    TempDir dir("auth");
    conf::RedisConfig config = configFor(server);

    config.password_file = dir.write("right", "s3cret\r\n");
    {
        RedisClient client(config);
        client.start();
        EXPECT_TRUE(client.reachable()) << client.lastError();
        EXPECT_TRUE(run(client, {"PING"}).ok);
    }
    config.username = "default";  // Redis 6's AUTH user password
    {
        RedisClient client(config);
        client.start();
        EXPECT_TRUE(client.reachable()) << client.lastError();
    }
    config.username.clear();
    config.password_file = dir.write("wrong", "nope\n");
    {
        RedisClient client(config);
        client.start();
        EXPECT_FALSE(client.reachable());
        EXPECT_NE(client.lastError().find("AUTH refused: WRONGPASS"), std::string::npos) << client.lastError();
        Result result = run(client, {"PING"});
        EXPECT_FALSE(result.ok);
        EXPECT_NE(result.error.find("AUTH"), std::string::npos) << result.error;
    }
    config.password_file.clear();
    {
        RedisClient client(config);
        client.start();
        EXPECT_FALSE(client.reachable());
        EXPECT_NE(client.lastError().find("NOAUTH"), std::string::npos) << client.lastError();
    }
}

TEST(RedisClientAuth, ReadsThePasswordFileOnceAndNamesItWhenUnreadable) {
    conf::RedisConfig config;
    config.address = "127.0.0.1:1";
    config.password_file = "/nonexistent/dpgate-redis-password";
    try {
        RedisClient client(config);
        FAIL() << "no error";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("limits.redis.password_file"), std::string::npos) << e.what();
    }
}

TEST(RedisClientTls, VerifiesTheServerAgainstTheCaAndTheAddress) {
    TempDir dir("tls");
    const test::TlsFiles files = test::makeTlsFiles(dir, "IP:127.0.0.1,DNS:localhost");
    RedisServer server({.password = "", .tls = &files});
    conf::RedisConfig config = configFor(server);
    config.tls = true;
    config.ca_file = files.ca_cert;
    {
        RedisClient client(config);
        client.start();
        EXPECT_TRUE(client.reachable()) << client.lastError();
        Result echo = run(client, {"ECHO", "over tls"});
        ASSERT_TRUE(echo.ok) << echo.error;
        EXPECT_EQ(echo.reply.str, "over tls");
    }
    {
        conf::RedisConfig by_name = config;  // the name, with SNI
        by_name.address = "localhost:" + std::to_string(server.port());
        RedisClient client(by_name);
        client.start();
        EXPECT_TRUE(client.reachable()) << client.lastError();
    }
    {
        conf::RedisConfig system_store = config;  // the test CA is not in it
        system_store.ca_file.clear();
        RedisClient client(system_store);
        client.start();
        EXPECT_FALSE(client.reachable());
        EXPECT_NE(client.lastError().find("TLS handshake"), std::string::npos) << client.lastError();
    }
    {
        conf::RedisConfig plain = config;  // TCP to a TLS port: no PONG comes
        plain.tls = false;
        plain.connect_timeout_ms = 300;
        RedisClient client(plain);
        client.start();
        EXPECT_FALSE(client.reachable());
    }
}

TEST(RedisClientTls, RefusesACertificateForAnotherName) {
    TempDir dir("tls_other");
    const test::TlsFiles files = test::makeTlsFiles(dir, "DNS:redis.elsewhere.example");
    RedisServer server({.password = "", .tls = &files});
    conf::RedisConfig config = configFor(server);
    config.tls = true;
    config.ca_file = files.ca_cert;
    RedisClient client(config);
    client.start();
    EXPECT_FALSE(client.reachable());
    EXPECT_NE(client.lastError().find("TLS handshake"), std::string::npos) << client.lastError();
}

}  // namespace
}  // namespace dpgate::gateway::redis
