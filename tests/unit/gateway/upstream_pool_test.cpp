// The idle bound is per backend over all workers' pools: a busy worker keeps
// what it needs while the sum has room, and the sum never exceeds the bound.
#include "gateway/upstream_pool.hpp"

#include <gtest/gtest.h>

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
