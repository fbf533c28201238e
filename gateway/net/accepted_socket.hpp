// A client connection just accepted, made ready with the fewest system calls
// (counted in docs/BENCHMARKS.md). Asio's accept costs, besides accept(),
// per connection:
// - two ioctl(FIONBIO): one when Asio's first operation puts the socket in
//   non-blocking mode for itself, one when WriteNow (write_now.hpp) asks
//   for the same mode as the user's. Asked once before any operation, the
//   second is not made: Asio sees the mode set and sets nothing.
// - epoll_ctl(EPOLL_CTL_DEL) at close: Asio marks an accepted descriptor as
//   one that may have been duplicated, and takes it out of epoll by hand,
//   where closing the only descriptor of a socket does it. Nothing
//   duplicates the descriptors dpgate accepts.
// - getpeername(): the peer's address comes with accept() (Worker's accept
//   loop asks for it there), not from remote_endpoint().
// nginx makes none of these (accept4 with SOCK_NONBLOCK).
#pragma once

#include "gateway/net/drain_aware_read.hpp"
#include "gateway/net/net.hpp"

#include <boost/asio/detail/socket_ops.hpp>

namespace dpgate::gateway {

inline void prepareAccepted(tcp::socket& socket) {
    error_code ec;
    socket.non_blocking(true, ec);
    auto& impl = drain_aware_detail::SocketImpl::of(socket).get_implementation();
    impl.state_ &= ~boost::asio::detail::socket_ops::possible_dup;
}

}  // namespace dpgate::gateway
