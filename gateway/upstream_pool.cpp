#include "gateway/upstream_pool.hpp"

namespace dpgate::gateway {

UpstreamPool::UpstreamPool(net::io_context& io, DeadlineList& deadlines, const conf::BackendConfig& backend,
                           metrics::ShardedCount<int64_t>& idle_total, size_t max_idle, uint64_t connect_timeout_ms,
                           uint64_t idle_timeout_ms)
    : io_(io),
      deadlines_(deadlines),
      backend_(backend),
      idle_total_(idle_total),
      max_idle_(max_idle),
      connect_timeout_ms_(connect_timeout_ms),
      idle_timeout_(idle_timeout_ms) {}

std::unique_ptr<UpstreamConnection> UpstreamPool::takeIdle() {
    const auto now = coarseNow();  // an age against seconds: a tick's precision is plenty
    while (!idle_.empty()) {
        std::unique_ptr<UpstreamConnection> c = std::move(idle_.back());
        idle_.pop_back();
        idle_total_.sub(1);
        // Servers close idle keep-alive connections on their own clock
        // (uvicorn, which vLLM runs on, after 5 s); retire ours first. One
        // closed meanwhile anyway fails before any answer byte, and the relay
        // then resends on a fresh connection (Relay::send).
        if (now - c->idle_since < idle_timeout_) {
            c->reused = true;
            return c;
        }
    }
    return nullptr;
}

awaitable<std::pair<error_code, std::unique_ptr<UpstreamConnection>>> UpstreamPool::acquire() {
    if (std::unique_ptr<UpstreamConnection> idle = takeIdle()) co_return std::pair{error_code{}, std::move(idle)};
    co_return co_await connect();
}

awaitable<std::pair<error_code, std::unique_ptr<UpstreamConnection>>> UpstreamPool::connect() {
    if (endpoints_.empty()) {
        error_code ec;
        auto address = net::ip::make_address(backend_.host, ec);
        if (!ec) {
            endpoints_.emplace_back(address, backend_.port);
        } else {
            tcp::resolver resolver(io_);
            const std::string service = std::to_string(backend_.port);
            auto [rec, results] = co_await resolver.async_resolve(backend_.host, service, use_nothrow);
            if (rec) co_return std::pair{rec, nullptr};
            for (const auto& r : results) endpoints_.push_back(r.endpoint());
        }
    }
    // Each address in turn, the connect timeout for all of them together.
    std::unique_ptr<UpstreamConnection> c;
    error_code ec = net::error::host_not_found;
    const auto deadline = std::chrono::steady_clock::now() + ms(connect_timeout_ms_);
    for (const tcp::endpoint& endpoint : endpoints_) {
        c = std::make_unique<UpstreamConnection>(deadlines_, io_);
        c->stream.socket().open(endpoint.protocol(), ec);
        if (ec) continue;
        c->stream.expires_after(deadline - std::chrono::steady_clock::now());
        auto [cec] = co_await c->stream.async_connect(endpoint, use_nothrow);
        ec = cec;
        if (!ec || ec == beast::error::timeout) break;
    }
    if (ec) {
        endpoints_.clear();  // re-resolve next time: the name may have moved
        co_return std::pair{ec, nullptr};
    }
    c->stream.expires_never();
    c->stream.socket().set_option(tcp::no_delay(true), ec);
    co_return std::pair{error_code{}, std::move(c)};
}

void UpstreamPool::release(std::unique_ptr<UpstreamConnection> connection) {
    if (max_idle_ == 0) return;
    if (idle_total_.value() >= int64_t(max_idle_)) {
        if (idle_.empty()) return;  // other workers hold the allowance: this one closes
        idle_.pop_front();          // this worker's oldest makes room
        idle_total_.sub(1);
    }
    connection->stream.expires_never();
    connection->idle_since = coarseNow();
    idle_.push_back(std::move(connection));
    idle_total_.add(1);
}

void UpstreamPool::closeIdle() {
    idle_total_.sub(int64_t(idle_.size()));
    idle_.clear();
}

}  // namespace dpgate::gateway
