#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

namespace dpgate::sim {

using Executor = boost::asio::strand<boost::asio::io_context::executor_type>;
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;

// One accepted client connection; its socket lives on its own strand.
struct Connection {
    explicit Connection(Socket socket_in) : socket(std::move(socket_in)) {}
    Socket socket;
    // Waiting for (the first bytes of) its next request.
    std::atomic<bool> idle{true};
    // Has carried a /sim/* request: exempt from the refuse fault so the test
    // that set the fault can also clear it over its keep-alive connection.
    std::atomic<bool> control{false};
};

// Open connections, so the refuse fault can close idle keep-alive ones.
class ConnectionRegistry {
public:
    std::uint64_t add(const std::shared_ptr<Connection>& connection);
    void remove(std::uint64_t id);
    // Closes, on each connection's strand, every idle non-control connection.
    void closeIdleApiConnections();

private:
    std::mutex mutex_;
    std::uint64_t next_id_ = 0;
    std::unordered_map<std::uint64_t, std::weak_ptr<Connection>> connections_;
};

}  // namespace dpgate::sim
