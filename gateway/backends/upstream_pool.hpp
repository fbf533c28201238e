// Keep-alive connections from one worker thread to one backend. Each worker
// owns its pools, so a connection, its timers and the client session using
// it always run on the same thread.
#pragma once

#include "conf/config.hpp"
#include "gateway/http/upstream_response_parser.hpp"
#include "gateway/metrics/sharded_count.hpp"
#include "gateway/net/net.hpp"
#include "gateway/net/timed_socket.hpp"

#include <deque>
#include <memory>
#include <optional>

namespace dpgate::gateway {

struct UpstreamConnection {
    TimedSocket stream;
    beast::flat_buffer buffer;  // bytes read past the last response; must be empty to reuse
    // The answer being read on this connection (set by the UpstreamExchange, emptied
    // before the connection goes back to the pool).
    std::optional<UpstreamResponseParser> answer;
    std::chrono::steady_clock::time_point idle_since{};
    bool reused = false;  // came from the idle list: may have been closed by the peer meanwhile
    // A flat_buffer starts at 512 bytes: a typical answer would then take two
    // reads and reach the client in two writes.
    UpstreamConnection(DeadlineList& deadlines, net::io_context& io) : stream(deadlines, io) {
        buffer.reserve(16 * 1024);
    }
};

class UpstreamPool {
public:
    // `max_idle` bounds the idle connections to this backend over all the
    // workers' pools together, counted in `idle_total`: a worker keeps as
    // many as its own load needs while the sum has room (a fixed share per
    // worker would make a busy worker close and reopen connections its quiet
    // neighbour is not using). The count is sharded: taking a connection
    // touches only this worker's cell, and only a release reads the sum.
    UpstreamPool(net::io_context& io, DeadlineList& deadlines, const conf::BackendConfig& backend,
                 metrics::ShardedCount<int64_t>& idle_total, size_t max_idle, uint64_t connect_timeout_ms,
                 uint64_t idle_timeout_ms);
    ~UpstreamPool() { closeIdle(); }

    // The idle connections takeIdle() closed instead of handing out.
    struct Drops {
        uint32_t bytes_waiting = 0;  // the backend sent bytes nobody asked for while it sat idle
        uint32_t closed = 0;         // the backend closed it (or it failed) while it sat idle
    };

    // An idle connection that is still alive and has nothing waiting
    // (reused set), or null; the others it closes, counted in `drops`. No
    // coroutine: a request that finds one costs no coroutine frame here.
    std::unique_ptr<UpstreamConnection> takeIdle(Drops* drops = nullptr);
    // takeIdle(), else a new one (connect timeout from config). The error is
    // the connect error.
    awaitable<std::pair<error_code, std::unique_ptr<UpstreamConnection>>> acquire();
    // A brand-new connection, never from the idle list (the retry after a
    // reused connection turned out to be dead).
    awaitable<std::pair<error_code, std::unique_ptr<UpstreamConnection>>> connect();

    // Only for a connection whose last exchange completed and allows
    // keep-alive, and that holds nothing past its last answer.
    void release(std::unique_ptr<UpstreamConnection> connection);

    void closeIdle();
    size_t idleCount() const { return idle_.size(); }

private:
    net::io_context& io_;
    DeadlineList& deadlines_;
    const conf::BackendConfig backend_;
    metrics::ShardedCount<int64_t>& idle_total_;
    const size_t max_idle_;
    const uint64_t connect_timeout_ms_;
    const std::chrono::milliseconds idle_timeout_;
    std::vector<tcp::endpoint> endpoints_;                  // resolved once, on first use
    std::deque<std::unique_ptr<UpstreamConnection>> idle_;  // most recently used at the back
};

}  // namespace dpgate::gateway
