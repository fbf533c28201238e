// The Redis client through which replicas share the keys' budgets
// (limits.redis). One connection, TCP or TLS, on a thread and io_context of
// its own, so a worker never waits on Redis: commands from any thread are
// queued, written in batches (pipelined) and matched to the replies in order.
//
// A command fails (Result::ok false) rather than wait: after
// limits.redis.timeout_ms without an answer, and at once while Redis cannot
// be reached. Since replies come in order, a timeout closes the connection
// and fails every command still waiting on it. A background loop reconnects
// (100 ms doubling to 1 s between attempts) and PINGs once a second while
// connected, so reachable() follows Redis within about a second either way.
#pragma once

#include "conf/config.hpp"
#include "gateway/net/net.hpp"
#include "gateway/redis/resp.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace boost::asio::ssl {
class context;
}

namespace dpgate::gateway::redis {

struct Result {
    // False: not sent, or no answer (unreachable, timeout, protocol error,
    // the client stopped); `error` says which.
    bool ok = false;
    std::string error;
    // Redis's answer when ok; Kind::error when Redis refused the command.
    Reply reply;
};

// A Lua script, run by its SHA-1 (EVALSHA) and loaded when Redis lacks it.
// Cheap to copy.
class Script {
public:
    explicit Script(std::string source);
    const std::string& source() const { return body_->source; }
    const std::string& sha1() const { return body_->sha1; }  // lowercase hex, as Redis names it

private:
    struct Body {
        std::string source;
        std::string sha1;
    };
    std::shared_ptr<const Body> body_;
};

class RedisClient {
public:
    // Reads password_file (one line) and the TLS files; throws naming the
    // limits.redis key when one cannot be read.
    explicit RedisClient(const conf::RedisConfig& config);
    ~RedisClient();  // stops and joins
    RedisClient(const RedisClient&) = delete;
    RedisClient& operator=(const RedisClient&) = delete;

    // Starts the client's thread and waits for the first connection (at most
    // connect_timeout_ms; commands fail fast until Redis answers).
    void start();
    // Fails every command waiting, and joins the thread; commands after it
    // fail at once. Not from a completion (the client's own thread).
    void stop();

    // A move-only void(Result), run on the client's thread.
    class Completion;

    // One command, co_awaited from a coroutine on any executor (the
    // awaiting coroutine resumes on its own executor). With GCC 12, build
    // the call in a named local, not inside the co_await expression:
    //   auto call = client.command(std::move(argv));
    //   Result result = co_await std::move(call);
    template <class Ex = Executor>
    net::awaitable<Result, Ex> command(std::vector<std::string> argv) {
        return net::async_initiate<const net::use_awaitable_t<Ex>, void(Result)>(
            [this](auto handler, std::string wire) { submit(std::move(wire), onCaller(std::move(handler))); },
            net::use_awaitable_t<Ex>{}, formatCommand(argv));
    }

    // EVALSHA sha numkeys keys... args...; on NOSCRIPT (Redis restarted or
    // flushed its scripts), SCRIPT LOAD and EVALSHA again, once.
    template <class Ex = Executor>
    net::awaitable<Result, Ex> eval(const Script& script, std::vector<std::string> keys,
                                    std::vector<std::string> args) {
        return net::async_initiate<const net::use_awaitable_t<Ex>, void(Result)>(
            [this](auto handler, Script script, std::string wire) {
                submitEval(std::move(script), std::move(wire), onCaller(std::move(handler)));
            },
            net::use_awaitable_t<Ex>{}, script, evalWire(script, keys, args));
    }

    // The same without waiting: `done` runs on the client's thread and must
    // not block (a request's reconcile, after its answer went out); only
    // when the client is not running or too many commands wait does it run
    // at once, on the caller's thread.
    void evalThen(const Script& script, std::vector<std::string> keys, std::vector<std::string> args,
                  std::function<void(Result)> done);

    // Whether the last command or PING got an answer.
    bool reachable() const { return reachable_.load(std::memory_order_relaxed); }
    // Why not, when not (else the last reason it was not).
    std::string lastError() const;
    // Connections made after the first.
    uint64_t reconnects() const { return reconnects_.load(std::memory_order_relaxed); }

    class Completion {
    public:
        Completion() = default;
        template <class F>
        explicit Completion(F f) : impl_(std::make_unique<Impl<F>>(std::move(f))) {}
        explicit operator bool() const { return impl_ != nullptr; }
        // Runs it once; it is empty after.
        void operator()(Result result) {
            std::unique_ptr<Base> impl = std::move(impl_);
            impl->call(std::move(result));
        }

    private:
        struct Base {
            virtual ~Base() = default;
            virtual void call(Result&& result) = 0;
        };
        template <class F>
        struct Impl final : Base {
            explicit Impl(F f) : f(std::move(f)) {}
            void call(Result&& result) override { f(std::move(result)); }
            F f;
        };
        std::unique_ptr<Base> impl_;
    };

private:
    struct Loop;  // what the client's thread keeps (redis_client.cpp)

    // Hands the result to the handler on its own executor, which is kept
    // from running out of work meanwhile.
    template <class Handler>
    static Completion onCaller(Handler handler) {
        auto work = net::prefer(net::get_associated_executor(handler), net::execution::outstanding_work.tracked);
        return Completion([handler = std::move(handler), work = std::move(work)](Result result) mutable {
            net::post(work, [handler = std::move(handler), result = std::move(result)]() mutable {
                std::move(handler)(std::move(result));
            });
        });
    }

    static std::string evalWire(const Script& script, const std::vector<std::string>& keys,
                                const std::vector<std::string>& args);
    // From any thread: `wire` (one command) queued on the client's thread.
    void submit(std::string wire, Completion done);
    void submitEval(Script script, std::string wire, Completion done);

    const conf::RedisConfig config_;
    const std::string password_;
    std::shared_ptr<boost::asio::ssl::context> tls_;
    net::io_context io_;
    std::unique_ptr<Loop> loop_;
    std::thread thread_;

    // Guards `accepting_` against stop(): every command posted before stop()
    // is failed by it, none is posted after.
    std::mutex submit_mutex_;
    bool accepting_ = false;
    std::atomic<uint64_t> queued_{0};  // commands posted and not yet completed

    std::atomic<bool> reachable_{false};
    std::atomic<uint64_t> reconnects_{0};
    mutable std::mutex error_mutex_;
    std::string last_error_;
};

}  // namespace dpgate::gateway::redis
