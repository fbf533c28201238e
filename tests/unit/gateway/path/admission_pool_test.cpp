// The admission pool: round robin between keys, at most per_key_threads
// threads per key, queued work answered on stop, verdicts and exceptions
// back on the caller's executor.
#include "gateway/path/admission_pool.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace dpgate::gateway {
namespace {

// named("a", i) trips GCC 12's -Wrestrict at -O3 (a false positive).
std::string named(std::string prefix, int i) {
    prefix += std::to_string(i);
    return prefix;
}

std::unique_ptr<admission::Admitter> plainAdmitter(size_t) {
    return std::make_unique<admission::Admitter>(nullptr, nullptr);
}

// Records when each job starts and holds its thread until released.
struct Log {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::string> started;
    int running = 0;
    int most_running = 0;
    int abandoned = 0;

    void waitForStarts(size_t n) {
        std::unique_lock lock(mutex);
        ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(30), [&] { return started.size() >= n; }))
            << "only " << started.size() << " of " << n << " jobs started";
    }
};

class HeldJob final : public AdmissionPool::Job {
public:
    HeldJob(Log& log, std::string name, std::shared_future<void> release)
        : log_(log), name_(std::move(name)), release_(std::move(release)) {}
    void run(admission::Admitter* admitter) override {
        if (!admitter) {
            std::lock_guard lock(log_.mutex);
            ++log_.abandoned;
            return;
        }
        {
            std::lock_guard lock(log_.mutex);
            log_.started.push_back(name_);
            log_.most_running = std::max(log_.most_running, ++log_.running);
        }
        log_.changed.notify_all();
        release_.wait();
        std::lock_guard lock(log_.mutex);
        --log_.running;
    }

private:
    Log& log_;
    std::string name_;
    std::shared_future<void> release_;
};

TEST(AdmissionPool, AnotherKeyIsServedBeforeTheFirstKeysBacklog) {
    Log log;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    {
        AdmissionPool pool(2, 1, plainAdmitter);
        for (int i = 1; i <= 4; ++i) pool.submit("alice", std::make_unique<HeldJob>(log, named("alice", i), released));
        log.waitForStarts(1);
        pool.submit("bob", std::make_unique<HeldJob>(log, "bob1", released));
        // alice holds her one thread; bob takes the other at once, ahead of
        // alice's three queued requests.
        log.waitForStarts(2);
        {
            std::lock_guard lock(log.mutex);
            EXPECT_EQ(log.started, (std::vector<std::string>{"alice1", "bob1"}));
            EXPECT_EQ(pool.queued(), 3u);
        }
        release.set_value();
        log.waitForStarts(5);
    }
    EXPECT_EQ(log.most_running, 2);
    EXPECT_EQ(log.abandoned, 0);
}

TEST(AdmissionPool, NoKeyHoldsMoreThanItsShareOfThreads) {
    Log log;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    AdmissionPool pool(4, 2, plainAdmitter);
    for (int i = 0; i < 6; ++i) pool.submit("alice", std::make_unique<HeldJob>(log, named("a", i), released));
    log.waitForStarts(2);
    for (int i = 0; i < 2; ++i) pool.submit("bob", std::make_unique<HeldJob>(log, named("b", i), released));
    log.waitForStarts(4);
    {
        std::lock_guard lock(log.mutex);
        EXPECT_EQ(log.running, 4);
        int alice = 0;
        for (const std::string& name : log.started) alice += name[0] == 'a';
        EXPECT_EQ(alice, 2) << "alice ran more than her two threads";
    }
    release.set_value();
    log.waitForStarts(8);
}

TEST(AdmissionPool, RoundRobinTakesEachWaitingKeyInTurn) {
    Log log;
    std::promise<void> hold_first;
    std::promise<void> release_rest;
    std::shared_future<void> rest = release_rest.get_future().share();
    release_rest.set_value();  // the later jobs finish at once
    AdmissionPool pool(1, 1, plainAdmitter);
    pool.submit("first", std::make_unique<HeldJob>(log, "first", hold_first.get_future().share()));
    log.waitForStarts(1);
    for (const char* name : {"a1", "a2", "a3"}) pool.submit("a", std::make_unique<HeldJob>(log, name, rest));
    for (const char* name : {"b1", "b2"}) pool.submit("b", std::make_unique<HeldJob>(log, name, rest));
    pool.submit("c", std::make_unique<HeldJob>(log, "c1", rest));
    hold_first.set_value();
    log.waitForStarts(7);
    std::lock_guard lock(log.mutex);
    EXPECT_EQ(log.started, (std::vector<std::string>{"first", "a1", "b1", "c1", "a2", "b2", "a3"}));
}

TEST(AdmissionPool, StopAnswersQueuedWorkAndRefusesNewWork) {
    Log log;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    AdmissionPool pool(1, 1, plainAdmitter);
    pool.submit("a", std::make_unique<HeldJob>(log, "running", released));
    log.waitForStarts(1);
    pool.submit("a", std::make_unique<HeldJob>(log, "queued1", released));
    pool.submit("b", std::make_unique<HeldJob>(log, "queued2", released));
    std::thread stopper([&] { pool.stop(); });
    stopper.join();  // stop() does not wait for running work
    pool.submit("c", std::make_unique<HeldJob>(log, "late", released));
    release.set_value();
    std::lock_guard lock(log.mutex);
    EXPECT_EQ(log.abandoned, 3);
    EXPECT_EQ(log.started, std::vector<std::string>{"running"});
}

TEST(AdmissionPool, JudgeResumesOnTheCallersExecutorWithTheVerdictOrTheException) {
    AdmissionPool pool(2, 1, plainAdmitter);
    net::io_context io;
    const std::thread::id io_thread = std::this_thread::get_id();
    std::string message;
    std::string thrown;
    bool resumed_on_io_thread = false;
    net::co_spawn(
        io,
        [&]() -> awaitable<void> {
            admission::Verdict verdict = co_await pool.judge("k", [](admission::Admitter&) -> admission::Verdict {
                return ApiError::badRequest("judged in the pool");
            });
            resumed_on_io_thread = std::this_thread::get_id() == io_thread;
            message = std::get<admission::Refused>(verdict).message;
            try {
                co_await pool.judge("k", [](admission::Admitter&) -> admission::Verdict {
                    throw std::runtime_error("the work failed");
                });
            } catch (const std::runtime_error& e) {
                thrown = e.what();
            }
        },
        net::detached);
    io.run();
    EXPECT_TRUE(resumed_on_io_thread);
    EXPECT_EQ(message, "judged in the pool");
    EXPECT_EQ(thrown, "the work failed");
}

}  // namespace
}  // namespace dpgate::gateway
