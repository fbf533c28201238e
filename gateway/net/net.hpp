// Aliases shared by every gateway file that waits on the network.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <chrono>

namespace dpgate::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using boost::system::error_code;
// Coroutines run on one io_context each (a worker's): naming its executor
// type, rather than the type-erased any_io_executor, spares a virtual copy
// and destroy of the executor at every co_await.
using Executor = net::io_context::executor_type;
template <class T>
using awaitable = boost::asio::awaitable<T, Executor>;

// Completion token for coroutines that handle errors as values: untrusted
// peers fail all the time, and an exception per failure is both slow and easy
// to let escape.
inline constexpr auto use_nothrow = net::as_tuple(net::use_awaitable_t<Executor>{});

inline std::chrono::milliseconds ms(uint64_t v) { return std::chrono::milliseconds(v); }

}  // namespace dpgate::gateway
