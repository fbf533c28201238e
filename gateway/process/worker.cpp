#include "gateway/process/worker.hpp"

#include "gateway/metrics/sharded_count.hpp"
#include "gateway/net/accepted_socket.hpp"
#include "gateway/path/make_admitter.hpp"
#include "gateway/platform/coarse_clock.hpp"
#include "gateway/platform/cycle_clock.hpp"
#include "gateway/platform/log.hpp"
#include "gateway/process/client_session.hpp"
#include "gateway/process/server.hpp"

#include <boost/asio/post.hpp>

#include <random>

#include <sys/socket.h>

namespace dpgate::gateway {

namespace {

// The per-address table's key: IPv4 in its v4-mapped IPv6 form.
ConnectionsPerAddress::Address addressKey(const net::ip::address& address) {
    const net::ip::address_v6 v6 =
        address.is_v4() ? net::ip::make_address_v6(net::ip::v4_mapped, address.to_v4()) : address.to_v6();
    return v6.to_bytes();
}

// 64 random bits: a request id source's seed.
std::uint64_t randomSeed() {
    std::random_device device;
    return std::uint64_t(device()) << 32 | device();
}

}  // namespace

Worker::Worker(Server& server, PathShared& path, size_t index)
    : server_(server),
      index_(index),
      path_shared_(path),
      path_local_(io_, deadlines_, server.config(), path.backends, path.metrics, server.idleUpstream(),
                  makeAdmitter(server.config(), server.modelFiles(), server.sharedSegments(), server.admissionThreads(),
                               AdmitterRole::worker)),
      request_ids_(randomSeed() ^ uint64_t(index)) {}

uint16_t Worker::listen(const tcp::endpoint& endpoint) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    int one = 1;
    ::setsockopt(acceptor_.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    acceptor_.bind(endpoint);
    acceptor_.listen(net::socket_base::max_listen_connections);
    return acceptor_.local_endpoint().port();
}

void Worker::start() {
    net::co_spawn(io_, acceptLoop(), net::detached);
    scheduleSweep();
    thread_ = std::thread([this] {
        // Every request counts into the metrics from here: in a cell of this
        // thread's own, without locked instructions, while one is free.
        const metrics::ShardOwner own_cells;
        io_.run();
        flushAccessLog();
    });
}

void Worker::join() {
    if (thread_.joinable()) thread_.join();
}

void Worker::scheduleSweep() {
    // Deadlines are kept to within this period (timed_socket.hpp).
    constexpr auto kSweepPeriod = std::chrono::milliseconds(100);
    sweep_timer_.expires_after(kSweepPeriod);
    sweep_timer_.async_wait([this](const error_code& ec) {
        if (ec) return;
        deadlines_.sweep(std::chrono::steady_clock::now());
        // After shutdown began, the sweep keeps going only while sessions
        // remain: io_.run() returns once the last one is gone.
        if (!stopping_ || !sessions_.empty()) scheduleSweep();
    });
}

awaitable<void> Worker::acceptLoop() {
    while (acceptor_.is_open()) {
        tcp::endpoint peer;  // filled by accept() itself: no getpeername() per connection
        auto [ec, socket] = co_await acceptor_.async_accept(peer, use_nothrow);
        if (ec == net::error::operation_aborted || !acceptor_.is_open()) break;
        if (ec) {
            // EMFILE and friends: back off instead of spinning on the error.
            logLine(LogLevel::warn, "accept failed: " + ec.message());
            net::steady_timer pause(io_, std::chrono::milliseconds(50));
            co_await pause.async_wait(use_nothrow);
            continue;
        }
        if (stopping_) continue;
        const conf::LimitsConfig& limits = server_.config().limits;
        // One address gets at most max_connections_per_ip of them.
        std::optional<ConnectionsPerAddress::Slot> slot =
            server_.connectionsPerAddress().open(addressKey(peer.address()), limits.max_connections_per_ip);
        if (!slot) {
            refuseConnection(socket, "per_ip");
            continue;
        }
        // Memory per connection is bounded, and so is their number: at the
        // limit the oldest idle connection of any worker makes room (the
        // count overshoots by the evictions still under way); with none idle,
        // the new connection is closed at once.
        if (server_.openConnections() >= int64_t(limits.max_connections) && !server_.evictIdleConnection(*this)) {
            refuseConnection(socket, "max_connections");
            continue;
        }
        prepareAccepted(socket);
        ClientSession::start(
            std::make_shared<ClientSession>(*this, std::move(socket), peer, server_.tlsContext(), std::move(*slot)));
    }
}

void Worker::refuseConnection(tcp::socket& socket, std::string_view reason) {
    error_code ignored;
    socket.close(ignored);
    server_.metrics().connections_refused.with({reason}).inc();
}

void Worker::detach(ClientSession* session) {
    idle_.remove(session->idleHook());
    sessions_.erase(session);
}

void Worker::markIdle(ClientSession& session) { idle_.add(session.idleHook(), coarseNow().time_since_epoch().count()); }

void Worker::markBusy(ClientSession& session) { idle_.remove(session.idleHook()); }

bool Worker::evictOldestIdle() {
    IdleHook* oldest = idle_.oldest();
    if (oldest == nullptr) return false;
    idle_.remove(*oldest);
    oldest->owner->closeIdle();
    server_.metrics().idle_connections_evicted.inc();
    return true;
}

void Worker::postEvictOldestIdle() {
    net::post(io_, [this] { evictOldestIdle(); });
}

void Worker::logAccess(const AccessRecord& record) {
    if (server_.config().log.access == "off") return;
    appendAccessLine(access_lines_, record, CycleClock::now());
    constexpr size_t kFlushBytes = 16 * 1024;
    if (access_lines_.size() >= kFlushBytes) {
        flushAccessLog();
        return;
    }
    if (access_flush_armed_) return;
    access_flush_armed_ = true;
    access_flush_timer_.expires_after(std::chrono::milliseconds(250));
    access_flush_timer_.async_wait([this](const error_code&) {
        access_flush_armed_ = false;
        flushAccessLog();
    });
}

void Worker::flushAccessLog() {
    if (access_lines_.empty()) return;
    server_.accessLog()->write(access_lines_);
    access_lines_.clear();
}

void Worker::beginShutdown() {
    net::post(io_, [this] {
        stopping_ = true;
        error_code ec;
        acceptor_.close(ec);
        for (ClientSession* session : std::vector<ClientSession*>(sessions_.begin(), sessions_.end()))
            session->closeIfIdle();
        path_local_.closeIdleUpstreams();
    });
}

void Worker::closeAll() {
    net::post(io_, [this] {
        for (ClientSession* session : std::vector<ClientSession*>(sessions_.begin(), sessions_.end())) session->close();
    });
}

}  // namespace dpgate::gateway
