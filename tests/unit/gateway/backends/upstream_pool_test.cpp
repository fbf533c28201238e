// The idle bound is per backend over all workers' pools: a busy worker keeps
// what it needs while the sum has room, and the sum never exceeds the bound.
#include "gateway/backends/upstream_pool.hpp"

#include <gtest/gtest.h>
#include <boost/asio/write.hpp>

#include <chrono>
#include <string_view>
#include <thread>
#include <vector>

using namespace dpgate::gateway;

namespace {

struct Backend {
    net::io_context io{1};
    DeadlineList deadlines;
    tcp::acceptor acceptor{io, tcp::endpoint(net::ip::address_v4::loopback(), 0)};
    std::vector<tcp::socket> accepted;
    dpgate::conf::BackendConfig config;

    Backend() {
        config.name = "primary";
        config.host = "127.0.0.1";
        config.port = acceptor.local_endpoint().port();
        acceptOne();
    }
    void acceptOne() {
        acceptor.async_accept([this](error_code ec, tcp::socket s) {
            if (ec) return;
            accepted.push_back(std::move(s));
            acceptOne();
        });
    }

    // Acquires `n` connections from `pool`, each a fresh connect.
    std::vector<std::unique_ptr<UpstreamConnection>> acquire(UpstreamPool& pool, size_t n) {
        std::vector<std::unique_ptr<UpstreamConnection>> got;
        net::co_spawn(
            io,
            [&]() -> awaitable<void> {
                for (size_t i = 0; i < n; ++i) {
                    auto [ec, c] = co_await pool.acquire();
                    EXPECT_FALSE(ec) << ec.message();
                    if (c) got.push_back(std::move(c));
                }
            },
            net::detached);
        while (got.size() < n && io.run_one_for(std::chrono::seconds(5))) {
        }
        return got;
    }
};

}  // namespace

TEST(UpstreamPool, IdleBoundIsSharedByAllWorkersPools) {
    Backend b;
    dpgate::metrics::ShardedCount<int64_t> idle_total;
    UpstreamPool busy(b.io, b.deadlines, b.config, idle_total, 4, 1000, 60000);
    UpstreamPool quiet(b.io, b.deadlines, b.config, idle_total, 4, 1000, 60000);

    auto many = b.acquire(busy, 3);  // more than an even share of 4 between two
    auto one = b.acquire(quiet, 1);
    ASSERT_EQ(many.size(), 3u);
    ASSERT_EQ(one.size(), 1u);
    for (auto& c : many) busy.release(std::move(c));
    for (auto& c : one) quiet.release(std::move(c));
    EXPECT_EQ(busy.idleCount(), 3u);
    EXPECT_EQ(quiet.idleCount(), 1u);
    EXPECT_EQ(idle_total.value(), 4);

    // Reuse: no new connection reaches the backend.
    b.io.poll();  // the backend's accepts so far
    const size_t connects = b.accepted.size();
    EXPECT_EQ(connects, 4u);
    auto again = b.acquire(busy, 3);
    b.io.poll();
    EXPECT_EQ(b.accepted.size(), connects);
    EXPECT_EQ(idle_total.value(), 1);
    for (auto& c : again) EXPECT_TRUE(c->reused);

    // At the bound, a worker with idle connections swaps its oldest out; one
    // with none closes what it releases.
    auto extra = b.acquire(quiet, 4);                   // 1 reused + 3 fresh
    for (auto& c : again) busy.release(std::move(c));   // total 3
    for (auto& c : extra) quiet.release(std::move(c));  // 4 offered, room for 1
    EXPECT_EQ(idle_total.value(), 4);
    EXPECT_EQ(busy.idleCount() + quiet.idleCount(), 4u);

    busy.closeIdle();
    EXPECT_EQ(idle_total.value(), int64_t(quiet.idleCount()));
}

TEST(UpstreamPool, ZeroKeepsNothing) {
    Backend b;
    dpgate::metrics::ShardedCount<int64_t> idle_total;
    UpstreamPool pool(b.io, b.deadlines, b.config, idle_total, 0, 1000, 60000);
    auto got = b.acquire(pool, 2);
    for (auto& c : got) pool.release(std::move(c));
    EXPECT_EQ(pool.idleCount(), 0u);
    EXPECT_EQ(idle_total.value(), 0);
}

namespace {

// One pooled connection to `b`, with its peer (the backend's side).
struct Pooled {
    Backend b;
    dpgate::metrics::ShardedCount<int64_t> idle_total;
    UpstreamPool pool{b.io, b.deadlines, b.config, idle_total, 4, 1000, 60000};
    Pooled() {
        auto got = b.acquire(pool, 1);
        EXPECT_EQ(got.size(), 1u);
        pool.release(std::move(got.front()));
        while (b.accepted.empty() && b.io.run_one_for(std::chrono::seconds(5))) {
        }
    }
    tcp::socket& peer() { return b.accepted.front(); }
    // Lets the reactor see what the peer did, as the worker's loop would.
    void settle() {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        b.io.poll();
    }
};

}  // namespace

TEST(UpstreamPool, AQuietIdleConnectionIsReused) {
    Pooled p;
    p.settle();
    UpstreamPool::Drops drops;
    auto c = p.pool.takeIdle(&drops);
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->reused);
    EXPECT_EQ(drops.bytes_waiting + drops.closed, 0u);
}

TEST(UpstreamPool, BytesThatCameWhileIdleCloseTheConnection) {
    Pooled p;
    net::write(p.peer(), net::buffer(std::string_view("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")));
    p.settle();
    UpstreamPool::Drops drops;
    EXPECT_FALSE(p.pool.takeIdle(&drops));
    EXPECT_EQ(drops.bytes_waiting, 1u);
    EXPECT_EQ(p.idle_total.value(), 0);
}

TEST(UpstreamPool, BytesTheReactorHasNotSeenYetAreFoundByThePeek) {
    // Straight after connect the reactor knows nothing of the socket: the
    // check asks the kernel.
    Pooled p;
    net::write(p.peer(), net::buffer(std::string_view("x")));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // in the socket, no event handled
    UpstreamPool::Drops drops;
    EXPECT_FALSE(p.pool.takeIdle(&drops));
    EXPECT_EQ(drops.bytes_waiting, 1u);
}

TEST(UpstreamPool, ACloseWhileIdleClosesTheConnection) {
    Pooled p;
    p.peer().shutdown(tcp::socket::shutdown_send);
    p.settle();
    UpstreamPool::Drops drops;
    EXPECT_FALSE(p.pool.takeIdle(&drops));
    EXPECT_EQ(drops.closed, 1u);
}

TEST(UpstreamPool, AfterADrainedReadTheReactorTellsWhetherAnythingCame) {
    Pooled p;
    auto c = p.pool.takeIdle();
    ASSERT_TRUE(c);
    // An answer read drain-aware, in a short read: the socket was drained there.
    net::write(p.peer(), net::buffer(std::string_view("answer")));
    c->stream.readDrainAwareChecked(true);
    char room[64];
    size_t got = 0;
    c->stream.async_read_some(net::buffer(room), [&](error_code ec, size_t n) {
        EXPECT_FALSE(ec);
        got = n;
    });
    while (got == 0 && p.b.io.run_one_for(std::chrono::seconds(5))) {
    }
    ASSERT_EQ(got, 6u);
    // Through Asio's public API (no internals in this build, or DPGATE_PLAIN)
    // the reactor's record cannot be read: anything may have come, and the
    // pool asks the kernel every time. The answers below are the same.
    const bool always = defaultReadPath() == ReadPath::public_api;
    EXPECT_EQ(mayHaveArrived(c->stream.socket()), always);
    p.pool.release(std::move(c));
    p.settle();
    c = p.pool.takeIdle();
    ASSERT_TRUE(c) << "nothing came: reused";
    EXPECT_EQ(mayHaveArrived(c->stream.socket()), always);

    // Bytes come while it sits idle; the reactor sees them, and the check too.
    p.pool.release(std::move(c));
    net::write(p.peer(), net::buffer(std::string_view("late")));
    p.settle();
    UpstreamPool::Drops drops;
    EXPECT_FALSE(p.pool.takeIdle(&drops));
    EXPECT_EQ(drops.bytes_waiting, 1u);
}
