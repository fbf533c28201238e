#include "gateway/backends/upstream_pool.hpp"

#include "gateway/net/drain_aware_read.hpp"
#include "gateway/platform/uncancellable_io.hpp"

#include <cerrno>

#include <sys/socket.h>

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

namespace {

enum class IdleState { quiet, bytes_waiting, closed };

// What came on an idle connection since its last answer ended. Anything at
// all is a reason to close it: bytes would be read as the next request's
// answer (a backend that answers twice, or late), and an end of stream
// means the backend is gone. HAProxy and nginx close such a connection
// when their event loop sees it readable; so does this, from what the
// reactor saw: the last read of an answer is drain-aware (UpstreamExchange), so the
// reactor's record says whether epoll has reported the socket since
// (mayHaveArrived, drain_aware_read.hpp), with no system call. Only when
// it has (or the answer's last read filled its buffer) does a peek ask the
// kernel; peeking every time costs one more recvfrom per proxied request,
// which HAProxy and nginx do not make (syscalls_per_request.py; about 3 %
// more CPU per request at 256 connections, concurrent_cpu.py). Either way,
// bytes the backend sends after the check, or that the reactor has not
// handled yet, are taken for the answer to the request sent next: HTTP/1.1
// cannot tell the two apart, and neither peer closes that window either.
IdleState idleState(tcp::socket& socket) {
    if (!mayHaveArrived(socket)) return IdleState::quiet;
    char byte;
    while (true) {
        const ssize_t n = recvUncancellable(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) return IdleState::bytes_waiting;
        if (n == 0) return IdleState::closed;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return IdleState::closed;
        skipNextReadTry(socket);  // empty now: the next takeIdle() needs no peek
        return IdleState::quiet;
    }
}

}  // namespace

std::unique_ptr<UpstreamConnection> UpstreamPool::takeIdle(Drops* drops) {
    const auto now = coarseNow();  // an age against seconds: a tick's precision is plenty
    while (!idle_.empty()) {
        std::unique_ptr<UpstreamConnection> c = std::move(idle_.back());
        idle_.pop_back();
        idle_total_.sub(1);
        // Servers close idle keep-alive connections on their own clock
        // (uvicorn, which vLLM runs on, after 5 s); retire ours first. One
        // closed after the check below fails before any answer byte, and
        // the exchange then resends on a fresh connection (UpstreamExchange::send).
        if (now - c->idle_since >= idle_timeout_) continue;
        switch (idleState(c->stream.socket())) {
            case IdleState::quiet: c->reused = true; return c;
            case IdleState::bytes_waiting:
                if (drops) ++drops->bytes_waiting;
                break;
            case IdleState::closed:
                if (drops) ++drops->closed;
                break;
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
