#include "connection_registry.hpp"

#include <boost/asio/post.hpp>

namespace dpgate::sim {

std::uint64_t ConnectionRegistry::add(const std::shared_ptr<Connection>& connection) {
    std::lock_guard lock(mutex_);
    auto id = next_id_++;
    connections_.emplace(id, connection);
    return id;
}

void ConnectionRegistry::remove(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    connections_.erase(id);
}

void ConnectionRegistry::closeIdleApiConnections() {
    std::lock_guard lock(mutex_);
    for (auto& [id, weak] : connections_) {
        auto connection = weak.lock();
        if (!connection || connection->control || !connection->idle) continue;
        boost::asio::post(connection->socket.get_executor(), [connection] {
            // Re-checked on the strand: the connection may have started a request.
            if (!connection->idle) return;
            boost::system::error_code ignored;
            connection->socket.shutdown(Socket::shutdown_both, ignored);
            connection->socket.close(ignored);
        });
    }
}

}  // namespace dpgate::sim
