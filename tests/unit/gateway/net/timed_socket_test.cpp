// TimedSocket's deadline contract on real sockets over loopback: an operation
// pending past its deadline fails with beast::error::timeout and the socket is
// closed; a deadline does not run while nothing is pending; the list follows
// the sockets' lifetimes.
#include "gateway/net/timed_socket.hpp"
#include "gateway/net/accepted_socket.hpp"

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <fcntl.h>

using namespace dpgate::gateway;
using namespace std::chrono_literals;

namespace {

struct Loopback {
    net::io_context io{1};
    DeadlineList deadlines;
    tcp::acceptor acceptor{io, tcp::endpoint(net::ip::address_v4::loopback(), 0)};
    std::optional<TimedSocket> client;
    tcp::socket server{io};

    explicit Loopback(ReadPath path) {
        client.emplace(deadlines, io);
        client->setReadPath(path);
        client->socket().connect(acceptor.local_endpoint());
        acceptor.accept(server);
    }

    // Sweeps every 10 ms, as a worker does every 100 ms, until `done`.
    void runSweeping(const bool& done) {
        net::steady_timer tick(io);
        std::function<void()> arm = [&] {
            tick.expires_after(10ms);
            tick.async_wait([&](const error_code& ec) {
                if (ec || done) return;
                deadlines.sweep(std::chrono::steady_clock::now());
                arm();
            });
        };
        arm();
        io.run_for(5s);
    }
};

// Every test that reads runs both ways (drain_aware_read.hpp): through
// Asio's internals where this build has them, and through the public API,
// their plain twin. Where the two differ by design, the test says how.
class TimedSocketPaths : public ::testing::TestWithParam<ReadPath> {
protected:
    bool internals() const { return GetParam() == ReadPath::asio_internals; }
};

std::vector<ReadPath> readPaths() {
    std::vector<ReadPath> paths{ReadPath::public_api};
    if (asio_internals::kCompiled) paths.insert(paths.begin(), ReadPath::asio_internals);
    return paths;
}

std::string pathName(const ::testing::TestParamInfo<ReadPath>& info) {
    return info.param == ReadPath::asio_internals ? "AsioInternals" : "PublicApi";
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(ReadPaths, TimedSocketPaths, ::testing::ValuesIn(readPaths()), pathName);

TEST_P(TimedSocketPaths, PendingReadPastItsDeadlineFailsWithTimeout) {
    Loopback l(GetParam());
    char byte;
    bool done = false;
    error_code result;
    auto start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration took{};
    l.client->expires_after(100ms);
    l.client->async_read_some(net::buffer(&byte, 1), [&](error_code ec, size_t) {
        result = ec;
        took = std::chrono::steady_clock::now() - start;
        done = true;
    });
    l.runSweeping(done);
    ASSERT_TRUE(done);
    EXPECT_EQ(result, beast::error::timeout);
    EXPECT_TRUE(l.client->timedOut());
    EXPECT_FALSE(l.client->socket().is_open());
    EXPECT_GE(took, 100ms);
}

TEST_P(TimedSocketPaths, DeadlineDoesNotRunWhileNothingIsPending) {
    Loopback l(GetParam());
    bool done = false;
    error_code result;
    size_t got = 0;
    char byte = 0;
    // A short deadline with no operation in flight: sweeps pass it by.
    l.client->expires_after(20ms);
    net::steady_timer later(l.io, 150ms);
    later.async_wait([&](const error_code&) {
        l.client->expires_after(2s);
        l.client->async_read_some(net::buffer(&byte, 1), [&](error_code ec, size_t n) {
            result = ec;
            got = n;
            done = true;
        });
        net::write(l.server, net::buffer("x", 1));
    });
    l.runSweeping(done);
    ASSERT_TRUE(done);
    EXPECT_FALSE(result) << result.message();
    EXPECT_EQ(got, 1u);
    EXPECT_EQ(byte, 'x');
    EXPECT_FALSE(l.client->timedOut());
}

TEST_P(TimedSocketPaths, CompletedOperationsAreNotSweptAndWritesTimeOutToo) {
    Loopback l(GetParam());
    bool done = false;
    error_code first, second;
    l.client->expires_after(50ms);
    net::async_write(*l.client, net::buffer("ping", 4), [&](error_code ec, size_t) {
        first = ec;
        // The peer never reads: a write large enough to fill both socket
        // buffers stays pending until the deadline ends it.
        static std::string big(16 << 20, 'x');
        l.client->expires_after(100ms);
        net::async_write(*l.client, net::buffer(big), [&](error_code ec2, size_t) {
            second = ec2;
            done = true;
        });
    });
    l.runSweeping(done);
    ASSERT_TRUE(done);
    EXPECT_FALSE(first) << first.message();
    EXPECT_EQ(second, beast::error::timeout);
}

TEST(TimedSocket, ListFollowsLifetimes) {
    net::io_context io;
    DeadlineList list;
    {
        TimedSocket a(list, io), b(list, io), c(list, io);
        EXPECT_EQ(list.size(), 3u);
        {
            TimedSocket d(list, io);
            EXPECT_EQ(list.size(), 4u);
        }
        EXPECT_EQ(list.size(), 3u);
        // Nothing pending: a passed deadline expires nothing.
        a.expires_after(-1s);
        EXPECT_EQ(list.sweep(std::chrono::steady_clock::now()), 0u);
    }
    EXPECT_EQ(list.size(), 0u);
}

// The tick-based clock the deadlines use stays within a few ticks of
// steady_clock (loosely: a virtual machine's timekeeping update can come
// late, and the clock adds a tick and 10 ms).
TEST(TimedSocket, DeadlineClockTracksSteadyClock) {
    using namespace std::chrono_literals;
    for (int i = 0; i < 200000; ++i) {
        const auto before = std::chrono::steady_clock::now();
        const auto deadline_now = dpgate::gateway::deadlineNow();
        const auto after = std::chrono::steady_clock::now();
        ASSERT_GE(deadline_now, before - 50ms) << "at iteration " << i;
        ASSERT_LE(deadline_now, after + 60ms) << "at iteration " << i;
    }
}

// Reads go through startRead, drain-aware (drain_aware_read.hpp): after a short
// read the next one waits for readiness instead of trying first. Bytes must
// never be missed for it, however they arrive.
namespace {

// Runs one read of up to `room` bytes to completion (or 2 s).
std::pair<error_code, std::string> readOnce(Loopback& l, size_t room) {
    std::string got(room, '\0');
    bool done = false;
    error_code result;
    size_t n = 0;
    l.client->async_read_some(net::buffer(got), [&](error_code ec, size_t bytes) {
        result = ec;
        n = bytes;
        done = true;
    });
    l.io.restart();
    l.io.run_for(2s);
    EXPECT_TRUE(done) << "the read never completed";
    if (!done) {  // end it while what it writes to still exists
        l.client->socket().cancel();
        l.io.restart();
        l.io.run_for(1s);
    }
    got.resize(n);
    return {result, got};
}

// Runs one read of up to `room` bytes with a 100 ms deadline, sweeping, to
// completion: {its result, the bytes read}.
std::pair<error_code, size_t> readWithDeadline(Loopback& l, size_t room) {
    std::string got(room, '\0');
    bool done = false;
    error_code result;
    size_t n = 0;
    l.client->expires_after(100ms);
    l.client->async_read_some(net::buffer(got), [&](error_code ec, size_t bytes) {
        result = ec;
        n = bytes;
        done = true;
    });
    l.io.restart();
    l.runSweeping(done);
    EXPECT_TRUE(done) << "the read never completed";
    return {result, n};
}

// Lets the reactor take in what is ready (poll() alone returns at once when
// nothing is pending).
void pollWithWork(Loopback& l) {
    auto work = net::make_work_guard(l.io);
    l.io.restart();
    l.io.poll();
}

// The peer sends `bytes` and ends its side; both have arrived, and the
// io_context has taken in their readiness event, before any read starts.
void bytesThenEnd(Loopback& l, std::string_view bytes) {
    net::write(l.server, net::buffer(bytes));
    l.server.shutdown(tcp::socket::shutdown_send);
    std::this_thread::sleep_for(50ms);
    pollWithWork(l);
}

}  // namespace

TEST_P(TimedSocketPaths, BytesThatCameWhileNoReadWaitedAreReadAfterAShortRead) {
    Loopback l(GetParam());
    l.client->readDrainAware();
    net::write(l.server, net::buffer("first", 5));
    auto [ec1, first] = readOnce(l, 4096);  // short: the socket is drained
    EXPECT_FALSE(ec1);
    EXPECT_EQ(first, "first");
    // The next bytes arrive while no read waits, and the io_context polls
    // (their readiness is consumed then); the next read still gets them.
    net::write(l.server, net::buffer("second", 6));
    pollWithWork(l);
    auto [ec2, second] = readOnce(l, 4096);
    EXPECT_FALSE(ec2);
    EXPECT_EQ(second, "second");
    // And bytes that arrive while the read waits.
    bool done = false;
    std::string third(4096, '\0');
    size_t n = 0;
    l.client->async_read_some(net::buffer(third), [&](error_code ec, size_t bytes) {
        EXPECT_FALSE(ec);
        n = bytes;
        done = true;
    });
    net::steady_timer later(l.io, 50ms);
    later.async_wait([&](const error_code&) { net::write(l.server, net::buffer("third", 5)); });
    l.io.restart();
    l.io.run_for(2s);
    ASSERT_TRUE(done);
    EXPECT_EQ(third.substr(0, n), "third");
}

TEST_P(TimedSocketPaths, AFullReadLeavesTheRestForTheNextReadAtOnce) {
    Loopback l(GetParam());
    l.client->readDrainAware();
    net::write(l.server, net::buffer("0123456789abcdefghij", 20));
    auto [ec1, first] = readOnce(l, 10);
    auto [ec2, second] = readOnce(l, 10);
    EXPECT_FALSE(ec1 || ec2);
    EXPECT_EQ(first + second, "0123456789abcdefghij");
}

TEST_P(TimedSocketPaths, EndOfStreamCancelAndAnEmptyBufferCompleteAsAsioDoes) {
    {
        Loopback l(GetParam());
        l.client->readDrainAware();
        l.server.close();
        auto [ec, got] = readOnce(l, 64);
        EXPECT_EQ(ec, net::error::eof);
        EXPECT_TRUE(got.empty());
    }
    {
        Loopback l(GetParam());
        l.client->readDrainAware();
        bool done = false;
        error_code result;
        char byte = 0;
        l.client->async_read_some(net::buffer(&byte, 1), [&](error_code ec, size_t) {
            result = ec;
            done = true;
        });
        net::post(l.io, [&] { l.client->socket().cancel(); });
        l.io.run_for(2s);
        ASSERT_TRUE(done);
        EXPECT_EQ(result, net::error::operation_aborted);
    }
    {
        Loopback l(GetParam());
        l.client->readDrainAware();
        auto [ec, got] = readOnce(l, 0);
        EXPECT_FALSE(ec);
        EXPECT_TRUE(got.empty());
    }
}

// The limit drain_aware_read.hpp names: an end of stream that came before a
// short read took the bytes ahead of it wakes nothing; the next read ends at
// its deadline (a client that half-closed right after its request). After
// the short read, an end of stream is seen at once. Through the public API
// every read tries first, and sees the earlier end at once too.
TEST_P(TimedSocketPaths, DrainAwareReadsSeeALaterEndAtOnceAndAnEarlierOneAtTheDeadline) {
    {
        Loopback l(GetParam());
        l.client->readDrainAware();
        net::write(l.server, net::buffer("request", 7));
        auto [ec1, got] = readOnce(l, 4096);
        EXPECT_EQ(got, "request");
        l.server.shutdown(tcp::socket::shutdown_send);
        auto [ec2, rest] = readOnce(l, 4096);
        EXPECT_EQ(ec2, net::error::eof);
    }
    {
        Loopback l(GetParam());
        l.client->readDrainAware();
        bytesThenEnd(l, "request");
        auto [ec1, got] = readOnce(l, 4096);
        EXPECT_EQ(got, "request");
        auto [result, n] = readWithDeadline(l, 1);
        EXPECT_EQ(result, internals() ? error_code(beast::error::timeout) : error_code(net::error::eof));
    }
}

// Backend answers are read without the drain-aware flag (drain_aware_read.hpp):
// as Asio reads, an end of stream that came with the last bytes is seen at
// once, whether the handler is a callback (run through Asio's handler_work)
// or a coroutine (run directly, on the socket's io_context).
TEST_P(TimedSocketPaths, ReadsThatAreNotDrainAwareSeeAnEndThatCameWithTheBytesAtOnce) {
    {
        Loopback l(GetParam());
        bytesThenEnd(l, "answer");
        auto [ec1, got] = readOnce(l, 4096);
        EXPECT_FALSE(ec1);
        EXPECT_EQ(got, "answer");
        auto [ec2, rest] = readOnce(l, 4096);  // no deadline set: a wait would fail readOnce
        EXPECT_EQ(ec2, net::error::eof);
        EXPECT_TRUE(rest.empty());
    }
    {
        Loopback l(GetParam());
        bytesThenEnd(l, "answer");
        std::string got;
        error_code end;
        bool done = false;
        net::co_spawn(
            l.io,
            [&]() -> awaitable<void> {
                std::string buffer(4096, '\0');
                auto [ec, n] = co_await l.client->async_read_some(net::buffer(buffer), use_nothrow);
                EXPECT_FALSE(ec);
                got.assign(buffer, 0, n);
                std::tie(end, n) = co_await l.client->async_read_some(net::buffer(buffer), use_nothrow);
                done = true;
            },
            net::detached);
        l.io.restart();
        l.io.run_for(2s);
        ASSERT_TRUE(done) << "the coroutine's reads never completed";
        EXPECT_EQ(got, "answer");
        EXPECT_EQ(end, net::error::eof);
    }
}

// The first read of a backend's answer waits for epoll before it tries a
// recv() (TimedSocket::waitBeforeNextRead): its request was just written
// whole, so anything the peer does in reply raises a new event.
TEST_P(TimedSocketPaths, AReadThatWaitsFirstGetsTheAnswerToWhatWasJustWritten) {
    Loopback l(GetParam());
    net::write(l.client->socket(), net::buffer("request", 7));
    std::string request(7, '\0');
    net::read(l.server, net::buffer(request));
    EXPECT_EQ(request, "request");
    net::write(l.server, net::buffer("answer", 6));
    std::this_thread::sleep_for(20ms);  // the answer is there before the read starts
    l.client->waitBeforeNextRead();
    auto [ec, got] = readOnce(l, 4096);
    EXPECT_FALSE(ec);
    EXPECT_EQ(got, "answer");
}

// A pooled connection the backend closed while it sat idle: the close came
// and the event loop took in its event before the request was written. The
// request draws a reset, a new event, and the read sees it at once.
TEST_P(TimedSocketPaths, AReadThatWaitsFirstSeesTheResetOfAConnectionClosedWhileIdle) {
    Loopback l(GetParam());
    l.server.close();
    std::this_thread::sleep_for(50ms);
    pollWithWork(l);
    net::write(l.client->socket(), net::buffer("request", 7));
    l.client->waitBeforeNextRead();
    auto [ec, got] = readOnce(l, 4096);
    EXPECT_TRUE(ec == net::error::connection_reset || ec == net::error::eof) << ec.message();
    EXPECT_TRUE(got.empty());
}

// It waits for the next event even when bytes are there already, if the
// event loop took in their event before: so it is only for the first read
// after a write, with no turn of the loop between. And only for one read:
// the next tries at once again. Through the public API nothing is skipped:
// the read tries first and gets the bytes.
TEST_P(TimedSocketPaths, WaitingFirstSkipsTheTryForOneReadOnly) {
    Loopback l(GetParam());
    net::write(l.server, net::buffer("early", 5));
    std::this_thread::sleep_for(20ms);
    pollWithWork(l);
    l.client->waitBeforeNextRead();
    auto [result, n] = readWithDeadline(l, 4096);
    if (internals()) {
        EXPECT_EQ(result, beast::error::timeout) << "the read tried a recv() first";
        EXPECT_EQ(n, 0u);
    } else {
        EXPECT_FALSE(result) << result.message();
        EXPECT_EQ(n, 5u);
    }

    Loopback again(GetParam());
    net::write(again.server, net::buffer("first", 5));
    again.client->waitBeforeNextRead();
    auto [ec1, first] = readOnce(again, 4096);
    EXPECT_EQ(first, "first");
    net::write(again.server, net::buffer("second", 6));
    std::this_thread::sleep_for(20ms);
    pollWithWork(again);
    auto [ec2, second] = readOnce(again, 4096);  // would wait for an event that never comes
    EXPECT_FALSE(ec1 || ec2);
    EXPECT_EQ(second, "second");
}

// The body of a backend's answer is read drain-aware with the end checked
// (TimedSocket::readDrainAwareChecked): after a short read the next read
// waits for an event instead of trying recv() first, and an end of stream
// that came with the short read's bytes raises none. The sweep re-arms a
// read still waiting after TimedSocket::kRecheckSweeps sweeps, and the end is seen then,
// long before the deadline. Through the public API the read tries first and
// sees the end at once.
TEST_P(TimedSocketPaths, CheckedReadsSeeAnEndThatCameWithTheLastBytesAtTheNextRecheck) {
    Loopback l(GetParam());
    l.client->readDrainAwareChecked(true);
    bytesThenEnd(l, "event");
    auto [ec1, got] = readOnce(l, 4096);
    EXPECT_FALSE(ec1);
    EXPECT_EQ(got, "event");  // short: the next read waits for an event

    bool done = false;
    error_code result;
    char byte = 0;
    l.client->expires_after(4s);
    l.client->async_read_some(net::buffer(&byte, 1), [&](error_code ec, size_t) {
        result = ec;
        done = true;
    });
    l.io.restart();
    l.io.run_for(300ms);  // no sweep: nothing wakes the read
    EXPECT_EQ(done, !internals()) << "how the read began: " << result.message();
    l.io.restart();
    l.runSweeping(done);
    ASSERT_TRUE(done);
    EXPECT_EQ(result, net::error::eof) << result.message();  // not the deadline's timeout
}

// Re-arming a socket whose read waits with nothing there changes nothing:
// bytes that come after the recheck still wake the read, and so does the
// end after them; a write on the socket still completes.
TEST_P(TimedSocketPaths, ARecheckWithNothingThereLeavesTheReadWaitingForWhatComes) {
    Loopback l(GetParam());
    l.client->readDrainAwareChecked(true);
    bool done = false;
    std::string got(4096, '\0');
    size_t n = 0;
    error_code result;
    l.client->expires_after(4s);
    l.client->async_read_some(net::buffer(got), [&](error_code ec, size_t bytes) {
        result = ec;
        n = bytes;
        done = true;
    });
    net::steady_timer later(l.io, TimedSocket::kRecheckSweeps * 10ms * 3 / 2);  // after one recheck
    later.async_wait([&](const error_code&) { net::write(l.server, net::buffer("late", 4)); });
    l.io.restart();
    l.runSweeping(done);
    ASSERT_TRUE(done);
    EXPECT_FALSE(result) << result.message();
    EXPECT_EQ(got.substr(0, n), "late");

    net::write(l.client->socket(), net::buffer("request", 7));
    std::string request(7, '\0');
    net::read(l.server, net::buffer(request));
    EXPECT_EQ(request, "request");
    l.server.shutdown(tcp::socket::shutdown_send);
    auto [ec, rest] = readOnce(l, 4096);
    EXPECT_EQ(ec, net::error::eof);
}

// An accepted socket made ready once (accepted_socket.hpp): non-blocking
// before any operation, so neither Asio nor WriteNow sets the mode again,
// and (through Asio's internals) not marked as a possible duplicate, so
// closing it leaves epoll to the kernel; through the public API, its plain
// twin, the mark stays. It reads, writes and closes as any other either way.
class AcceptedSocketPaths : public ::testing::TestWithParam<AcceptPath> {};

std::vector<AcceptPath> acceptPaths() {
    std::vector<AcceptPath> paths{AcceptPath::public_api};
    if (asio_internals::kCompiled) paths.insert(paths.begin(), AcceptPath::asio_internals);
    return paths;
}

INSTANTIATE_TEST_SUITE_P(AcceptPaths, AcceptedSocketPaths, ::testing::ValuesIn(acceptPaths()),
                         [](const ::testing::TestParamInfo<AcceptPath>& info) {
                             return info.param == AcceptPath::asio_internals ? "AsioInternals" : "PublicApi";
                         });

TEST_P(AcceptedSocketPaths, IsNonBlockingOnceAndNotAPossibleDuplicate) {
    Loopback l(defaultReadPath());
#ifdef DPGATE_ASIO_INTERNALS
    EXPECT_TRUE(asio_internals::possibleDup(l.server)) << "Asio marks what it accepts as a possible duplicate";
#endif
    prepareAccepted(l.server, GetParam());
    EXPECT_TRUE(l.server.non_blocking());
    EXPECT_NE(::fcntl(l.server.native_handle(), F_GETFL) & O_NONBLOCK, 0);
#ifdef DPGATE_ASIO_INTERNALS
    EXPECT_EQ(asio_internals::possibleDup(l.server), GetParam() == AcceptPath::public_api);
#endif

    std::string got(16, '\0');
    size_t n = 0;
    l.server.async_read_some(net::buffer(got), [&](error_code ec, size_t bytes) {
        EXPECT_FALSE(ec);
        n = bytes;
    });
    net::write(l.client->socket(), net::buffer("hello", 5));
    l.io.restart();
    l.io.run_for(2s);
    EXPECT_EQ(got.substr(0, n), "hello");
    net::write(l.server, net::buffer("back", 4));
    auto [ec, answer] = readOnce(l, 16);
    EXPECT_EQ(answer, "back");
    l.server.close();
    auto [end, rest] = readOnce(l, 16);
    EXPECT_EQ(end, net::error::eof);
}
