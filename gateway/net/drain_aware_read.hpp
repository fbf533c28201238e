// A socket read that tells Asio's reactor when it drained the socket, so the
// next read waits for readiness instead of trying first and failing.
//
// Asio tries every read on a stream socket at once ("speculative"), before
// it waits for epoll, unless the last read on that socket found the end of
// the stream. Between the requests of a keep-alive client the socket is
// usually empty, so that first try is a failed recv(): in the proxy
// benchmark a quarter of the requests pay one, and a failed recv() costs
// a whole system call (2.7 us on the benchmark's virtual machine, where
// HAProxy and nginx make none: they wait for readiness after a short read).
//
// This operation is Asio's own read operation with one difference when it
// is drain-aware: a read that returns fewer bytes than it had room for
// reports the socket exhausted. The reactor then skips the next read's
// first try, until epoll reports new bytes. Nothing is lost: with
// edge-triggered epoll, bytes that arrive after the short read raise a new
// event, and the reactor records an event that comes while no read waits,
// so the next read tries at once again.
//
// One thing is seen later: an end of stream (FIN) that was already there
// when a short read took the last bytes before it raised its event before
// that read, so nothing wakes the next read. From clients
// (TimedSocket::readDrainAware) that is a client that half-closed right
// after its request: its connection closes at the keep-alive deadline
// instead of at once. The body of a backend's answer whose end its bytes
// tell (chunked, or with a length) is read drain-aware too
// (TimedSocket::readDrainAwareChecked): a stream's events come one short
// read each, and each would otherwise cost a failed recv() (counted in
// docs/BENCHMARKS.md). There the end is a backend that died mid-answer, and
// it must not wait for the stream's idle deadline (minutes): a read that has
// waited a second has its socket re-armed (rearmRead), which reports an end
// already there. A body that runs to the close, and an answer's head, are
// read with the flag off: then only the end of the stream reports the socket
// exhausted, as in Asio.
//
// Drain-aware or not, two things are cheaper than in Asio's operation
// (measured in docs/BENCHMARKS.md): recv() is called without glibc's
// cancellation bookkeeping (uncancellable_io.hpp), and a coroutine's
// handler runs without handler_work's count of outstanding work
// (RecvOp::doComplete in asio_internals.hpp).
//
// The fast path drain_aware_read (common/fast_paths.hpp). It is built from
// Asio's private internals, which live in asio_internals.hpp and exist for
// Boost 1.81 alone; its plain twin, beside each function below, is Asio's
// public socket.async_read_some, whose reads always try recv() first (so
// the re-arm and the skipped try have nothing to do). ReadPath chooses; the
// process's choice is defaultReadPath(), and tests run both.
#pragma once

#include "common/fast_paths.hpp"
#include "gateway/net/asio_internals.hpp"
#include "gateway/net/net.hpp"

#include <cstdint>
#include <utility>

namespace dpgate::gateway {

enum class ReadPath : uint8_t {
    asio_internals,  // the fast path
    public_api,      // its plain twin
};

// Asio's internals where this build has them and DPGATE_PLAIN leaves
// drain_aware_read on; else the public API.
inline ReadPath defaultReadPath() {
    return asio_internals::kCompiled && fastPathOn(FastPath::drain_aware_read) ? ReadPath::asio_internals
                                                                               : ReadPath::public_api;
}

// Starts a read of `buffer` on `socket`; `handler(error_code, size_t)` runs
// as for socket.async_read_some. Not `drain_aware`: the read is Asio's own
// but for the recv() it calls (uncancellable_io.hpp).
template <class Handler>
void startRead(tcp::socket& socket, net::mutable_buffer buffer, bool drain_aware, Handler handler,
               ReadPath path = defaultReadPath()) {
#ifdef DPGATE_ASIO_INTERNALS
    if (path == ReadPath::asio_internals) {
        asio_internals::startRead(socket, buffer, drain_aware, std::move(handler));
        return;
    }
#endif
    (void)drain_aware, (void)path;
    socket.async_read_some(buffer, std::move(handler));
}

// The next read on `socket` waits for the socket's next epoll event
// instead of trying recv() first, as after a read that drained it; any epoll
// event for the socket undoes it. Sound only where whatever is to be read
// can come only after now, and raises an event when it does
// (TimedSocket::waitBeforeNextRead), and on the thread that runs the
// socket's io_context. Public API: the read tries first, as Asio's do.
inline void skipNextReadTry(tcp::socket& socket, ReadPath path = defaultReadPath()) {
#ifdef DPGATE_ASIO_INTERNALS
    if (path == ReadPath::asio_internals) asio_internals::setTryNextRead(socket, false);
#endif
    (void)socket, (void)path;
}

// The reverse: the next read tries recv() at once, as Asio's reads do
// after anything but the end of the stream. Always sound (at worst one
// recv() finds nothing); for a read that must not miss an end of stream
// that came with the bytes of a drain-aware read before it. Public API:
// every read does.
inline void tryNextReadAtOnce(tcp::socket& socket, ReadPath path = defaultReadPath()) {
#ifdef DPGATE_ASIO_INTERNALS
    if (path == ReadPath::asio_internals) asio_internals::setTryNextRead(socket, true);
#endif
    (void)socket, (void)path;
}

// False when the reactor has handled no readiness of the socket (bytes,
// an end of stream, an error) since a drain-aware read drained it, or
// skipNextReadTry: then nothing has come that epoll told of. True when
// something may have (or the socket is not registered): only recv() can
// tell. Read on the socket's io_context thread (see skipNextReadTry).
// Public API: always true.
inline bool mayHaveArrived(tcp::socket& socket, ReadPath path = defaultReadPath()) {
#ifdef DPGATE_ASIO_INTERNALS
    if (path == ReadPath::asio_internals) return asio_internals::mayHaveArrived(socket);
#endif
    (void)socket, (void)path;
    return true;
}

// Re-arms the socket's epoll registration (EPOLL_CTL_MOD with the events it
// has), as Asio does for a read started without a try: the kernel then
// reports what is ready now. An end of stream that came with the bytes a
// drain-aware read took raised its event before that read, and the read
// after it waits for an event that will not come; re-armed, the socket
// reports it. One system call; nothing happens when nothing is there. On the
// thread that runs the socket's io_context (see skipNextReadTry). Public
// API: nothing to do, as every read tried recv() first.
inline void rearmRead(tcp::socket& socket, ReadPath path = defaultReadPath()) {
#ifdef DPGATE_ASIO_INTERNALS
    if (path == ReadPath::asio_internals) asio_internals::rearmRead(socket);
#endif
    (void)socket, (void)path;
}

}  // namespace dpgate::gateway
