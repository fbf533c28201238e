// One thread, one io_context: its own acceptor on the shared port
// (SO_REUSEPORT lets the kernel spread connections), its own upstream pools,
// and the client sessions it accepted. Nothing here is touched from another
// thread except through post().
#pragma once

#include "admission/admit.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/net/idle_list.hpp"
#include "gateway/net/net.hpp"
#include "gateway/net/timed_socket.hpp"
#include "gateway/path/access_log.hpp"
#include "gateway/path/path_parts.hpp"
#include "gateway/path/request_id.hpp"

#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

namespace dpgate::gateway {

class Server;
class ClientSession;

class Worker {
public:
    // `path`: what this worker's requests share with every other worker's.
    Worker(Server& server, PathShared& path, size_t index);

    net::io_context& io() { return io_; }
    // The deadlines of this worker's client and upstream sockets.
    DeadlineList& deadlines() { return deadlines_; }
    Server& server() { return server_; }
    size_t index() const { return index_; }
    RequestIdSource& requestIds() { return request_ids_; }
    // The two parts of the process a request on this worker may use.
    PathShared& pathShared() { return path_shared_; }
    PathLocal& pathLocal() { return path_local_; }
    bool stopping() const { return stopping_; }

    // Binds (SO_REUSEPORT) and starts accepting; returns the bound port.
    uint16_t listen(const tcp::endpoint& endpoint);
    void start();  // runs io_ on a new thread
    void join();

    // From any thread: stop accepting, close idle client connections, let
    // requests in flight finish; they close their connection when done.
    void beginShutdown();
    // From any thread: close every client connection now (drain deadline).
    void closeAll();
    void stop() { io_.stop(); }

    // Buffers the request's access-log line (see access_log.hpp); a no-op
    // when log.access is off.
    void logAccess(const AccessRecord& record);
    void flushAccessLog();

    void attach(ClientSession* session) { sessions_.insert(session); }
    void detach(ClientSession* session);

    // A client connection waits for a request or lingers (markIdle), or
    // works on one (markBusy); see idle_list.hpp.
    void markIdle(ClientSession& session);
    void markBusy(ClientSession& session);
    // From any thread: since when (steady clock, ns) this worker's oldest
    // idle connection has been idle; IdleList::kNone when it has none.
    int64_t oldestIdleSince() const { return idle_.oldestSince(); }
    // Closes this worker's oldest idle connection, if it has one: room for a
    // new one at max_connections (Server::evictIdleConnection). On this
    // worker's thread; from another, postEvictOldestIdle().
    bool evictOldestIdle();
    void postEvictOldestIdle();

private:
    awaitable<void> acceptLoop();
    // A new connection closed at once, counted by `reason` (dpgate_connections_refused_total).
    void refuseConnection(tcp::socket& socket, std::string_view reason);
    void scheduleSweep();

    Server& server_;
    const size_t index_;
    // Declared before io_: destroying io_ destroys the sessions' coroutine
    // frames, and each session detaches itself from this set.
    std::unordered_set<ClientSession*> sessions_;
    IdleList idle_;           // those of sessions_ waiting for a request or lingering
    DeadlineList deadlines_;  // before io_ too: sockets unlink themselves as frames go
    // One thread runs it, and every socket on it is opened, read, written
    // and closed from that thread (other threads post to it): the reactor's
    // per-socket locks are switched off. Posting from other threads stays safe.
    net::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
    tcp::acceptor acceptor_{io_};
    PathShared& path_shared_;
    PathLocal path_local_;
    RequestIdSource request_ids_;
    std::string access_lines_;
    net::steady_timer access_flush_timer_{io_};
    net::steady_timer sweep_timer_{io_};
    bool access_flush_armed_ = false;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace dpgate::gateway
