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
//
// The fast path accepted_socket (common/fast_paths.hpp): the mark is Asio's
// private state (asio_internals.hpp, Boost 1.81 alone). Its plain twin sets
// the mode through the public API and leaves the mark, so the close costs
// the epoll_ctl.
#pragma once

#include "common/fast_paths.hpp"
#include "gateway/net/asio_internals.hpp"
#include "gateway/net/net.hpp"

namespace dpgate::gateway {

enum class AcceptPath : uint8_t {
    asio_internals,  // the fast path
    public_api,      // its plain twin
};

inline AcceptPath defaultAcceptPath() {
    return asio_internals::kCompiled && fastPathOn(FastPath::accepted_socket) ? AcceptPath::asio_internals
                                                                              : AcceptPath::public_api;
}

inline void prepareAccepted(tcp::socket& socket, AcceptPath path = defaultAcceptPath()) {
    error_code ec;
    socket.non_blocking(true, ec);
#ifdef DPGATE_ASIO_INTERNALS
    if (path == AcceptPath::asio_internals) asio_internals::forgetPossibleDup(socket);
#endif
    (void)path;
}

}  // namespace dpgate::gateway
