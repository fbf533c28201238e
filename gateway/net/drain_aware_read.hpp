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
// Either way two things are cheaper than in Asio's operation (measured in
// docs/BENCHMARKS.md): recv() is called without glibc's cancellation
// bookkeeping (uncancellable_io.hpp), and a coroutine's handler runs
// without handler_work's count of outstanding work (see doComplete).
//
// It is built from Asio's reactor operation interface (reactor_op,
// handler_work, the per-socket reactor data, the socket service's start_op),
// as Asio's own operations are: Boost 1.81's layout, which the build pins
// (libboost1.81-dev).
#pragma once

#include "gateway/net/net.hpp"
#include "gateway/platform/uncancellable_io.hpp"

#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/memory.hpp>
#include <boost/asio/detail/reactive_socket_service_base.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>

#include <sys/epoll.h>

#include <cassert>
#include <cerrno>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace dpgate::gateway {

namespace drain_aware_detail {

namespace ad = boost::asio::detail;

template <class Handler, class IoExecutor>
class RecvOp : public ad::reactor_op {
public:
    BOOST_ASIO_DEFINE_HANDLER_PTR(RecvOp);

    // A handler whose executor is an io_context's (a coroutine's) runs
    // directly; any other (TLS's composed operations) through handler_work,
    // as in Asio's own operations.
    static constexpr bool kOnIoContext = std::is_same_v<net::associated_executor_t<Handler>, Executor>;

    RecvOp(int socket, net::mutable_buffer buffer, bool drain_aware, Handler& handler, const IoExecutor& io_ex)
        : ad::reactor_op(error_code(), &RecvOp::doPerform, &RecvOp::doComplete),
          drain_aware_(drain_aware),
          socket_(socket),
          buffer_(buffer),
          handler_(std::move(handler)),
          work_(handler_, io_ex) {}

    static status doPerform(ad::reactor_op* base) {
        auto* o = static_cast<RecvOp*>(base);
        if (!recvNow(o->socket_, o->buffer_, o->ec_, o->bytes_transferred_))
            return not_done;  // nothing there yet: wait for epoll
        // Drain-aware: a short read (or the end of the stream, or a failure)
        // left the socket empty. Else, as Asio's own: only the end of the
        // stream did.
        if (o->drain_aware_) return o->bytes_transferred_ < o->buffer_.size() ? done_and_exhausted : done;
        return o->bytes_transferred_ == 0 ? done_and_exhausted : done;
    }

    static void doComplete(void* owner, ad::operation* base, const error_code&, std::size_t) {
        auto* o = static_cast<RecvOp*>(base);
        ptr p = {ad::addressof(o->handler_), o, o};
        // The handler (and its work, if any) is moved out before the
        // operation's memory is freed: the memory may belong to the
        // handler's allocator.
        auto work = std::move(o->work_);
        ad::binder2<Handler, error_code, std::size_t> handler(o->handler_, o->ec_, o->bytes_transferred_);
        p.h = ad::addressof(handler.handler_);
        p.reset();
        if (owner) {
            ad::fenced_block b(ad::fenced_block::half);
            if constexpr (kOnIoContext) {
                // Here, on the thread running the socket's io_context, which
                // is the handler's own executor: where Asio's handler_work
                // would run it, without its count of outstanding work. The
                // reactor counts the operation while it waits and the
                // scheduler its completion while queued; the count would be
                // two locked instructions at the start and two at the end
                // (about 14 ns each here, routing/spin_lock.hpp).
                handler();
            } else {
                work.complete(handler, handler.handler_);
            }
        }
    }

private:
    // Asio's socket_ops::non_blocking_recv1 for a stream socket, with
    // recvUncancellable: false when the socket had nothing (try again
    // later); else done, with the bytes read, or the end of the stream
    // (error::eof), or the failure in `ec`.
    static bool recvNow(int socket, net::mutable_buffer buffer, error_code& ec, std::size_t& bytes) {
        while (true) {
            const ssize_t n = recvUncancellable(socket, buffer.data(), buffer.size(), 0);
            if (n > 0) {
                ec = {};
                bytes = std::size_t(n);
                return true;
            }
            if (n == 0) {
                ec = net::error::eof;
                return true;
            }
            const int error = errno;
            if (error == EINTR) continue;
            if (error == EAGAIN || error == EWOULDBLOCK) return false;
            ec = error_code(error, boost::system::system_category());
            bytes = 0;
            return true;
        }
    }

    struct NoWork {
        NoWork(Handler&, const IoExecutor&) {}
    };

    bool drain_aware_;
    int socket_;
    net::mutable_buffer buffer_;
    Handler handler_;
    [[no_unique_address]] std::conditional_t<kOnIoContext, NoWork, ad::handler_work<Handler, IoExecutor>> work_;
};

// The socket's reactor state: protected in basic_socket, reached through
// a member pointer named in a derived class.
struct SocketImpl : tcp::socket {
    static auto& of(tcp::socket& socket) { return socket.*(&SocketImpl::impl_); }
};

// The socket service's start_op (protected), reached the same way. It holds
// the reactor: no use_service() lookup per read, which takes the context's
// service-registry mutex and walks its list (1 % of a small proxied
// request's instructions).
struct ServiceStart : boost::asio::detail::reactive_socket_service_base {
    static constexpr auto startOp = &ServiceStart::start_op;
};

// The reactor's per-socket record of whether the next read may try recv()
// at once (epoll_reactor::descriptor_state::try_speculative_, private: the
// reactor alone sets it, true on every epoll event, false after a read that
// drained the socket). An explicit instantiation may name a private member
// ([temp.spec.general]/6); the friend it defines hands the member pointer
// out.
using DescriptorState = boost::asio::detail::epoll_reactor::descriptor_state;
using TrySpeculative = bool (DescriptorState::*)[boost::asio::detail::epoll_reactor::max_ops];
TrySpeculative trySpeculative();
template <TrySpeculative Member>
struct ExposeTrySpeculative {
    friend TrySpeculative trySpeculative() { return Member; }
};
template struct ExposeTrySpeculative<&DescriptorState::try_speculative_>;

// The same for what rearmRead needs: the socket's reactor, the events it is
// registered for, and the reactor's epoll descriptor.
using ReactorOf = boost::asio::detail::epoll_reactor* DescriptorState::*;
using RegisteredEvents = uint32_t DescriptorState::*;
using EpollFd = int boost::asio::detail::epoll_reactor::*;
ReactorOf reactorOf();
RegisteredEvents registeredEvents();
EpollFd epollFd();
template <ReactorOf R, RegisteredEvents E, EpollFd F>
struct ExposeRegistration {
    friend ReactorOf reactorOf() { return R; }
    friend RegisteredEvents registeredEvents() { return E; }
    friend EpollFd epollFd() { return F; }
};
template struct ExposeRegistration<&DescriptorState::reactor_, &DescriptorState::registered_events_,
                                   &boost::asio::detail::epoll_reactor::epoll_fd_>;

}  // namespace drain_aware_detail

// Starts a read of `buffer` on `socket`; `handler(error_code, size_t)` runs
// as for socket.async_read_some. Not `drain_aware`: the read is Asio's own
// but for the recv() it calls (uncancellable_io.hpp).
template <class Handler>
void startRead(tcp::socket& socket, net::mutable_buffer buffer, bool drain_aware, Handler handler) {
    namespace ad = boost::asio::detail;
    using IoExecutor = tcp::socket::executor_type;
    using Op = drain_aware_detail::RecvOp<Handler, IoExecutor>;
    auto& io = drain_aware_detail::SocketImpl::of(socket);
    auto& impl = io.get_implementation();
    const bool is_continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
    // Run directly, the handler must belong to the socket's own io_context.
    if constexpr (Op::kOnIoContext)
        assert(&net::get_associated_executor(handler).context() ==
               &net::query(socket.get_executor(), net::execution::context));
    typename Op::ptr p = {ad::addressof(handler), Op::ptr::allocate(handler), nullptr};
    p.p = new (p.v) Op(impl.socket_, buffer, drain_aware, handler, io.get_executor());
    // As Asio's own read starts: with nothing to read into (`noop`) or no
    // non-blocking mode it completes at once, else the reactor may try the
    // read first (speculative).
    ad::reactive_socket_service_base& service = io.get_service();
    (service.*drain_aware_detail::ServiceStart::startOp)(impl, ad::reactor::read_op, p.p, is_continuation,
                                                         /*is_non_blocking=*/true, /*noop=*/buffer.size() == 0);
    p.v = p.p = nullptr;
}

// The next read on `socket` waits for the socket's next epoll event
// instead of trying recv() first, as after a read that drained it; any epoll
// event for the socket undoes it. Sound only where whatever is to be read
// can come only after now, and raises an event when it does
// (TimedSocket::waitBeforeNextRead), and on the thread that runs the
// socket's io_context, which locks nothing for the reactor's per-socket
// record (BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO) or else owns it.
inline void skipNextReadTry(tcp::socket& socket) {
    auto& impl = drain_aware_detail::SocketImpl::of(socket).get_implementation();
    if (impl.reactor_data_ != nullptr)
        (impl.reactor_data_->*drain_aware_detail::trySpeculative())[boost::asio::detail::epoll_reactor::read_op] =
            false;
}

// The reverse: the next read tries recv() at once, as Asio's reads do
// after anything but the end of the stream. Always sound (at worst one
// recv() finds nothing); for a read that must not miss an end of stream
// that came with the bytes of a drain-aware read before it.
inline void tryNextReadAtOnce(tcp::socket& socket) {
    auto& impl = drain_aware_detail::SocketImpl::of(socket).get_implementation();
    if (impl.reactor_data_ != nullptr)
        (impl.reactor_data_->*drain_aware_detail::trySpeculative())[boost::asio::detail::epoll_reactor::read_op] = true;
}

// False when the reactor has handled no readiness of the socket (bytes,
// an end of stream, an error) since a drain-aware read drained it, or
// skipNextReadTry: then nothing has come that epoll told of. True when
// something may have (or the socket is not registered): only recv() can
// tell. Read on the socket's io_context thread (see skipNextReadTry).
inline bool mayHaveArrived(tcp::socket& socket) {
    auto& impl = drain_aware_detail::SocketImpl::of(socket).get_implementation();
    return impl.reactor_data_ == nullptr ||
           (impl.reactor_data_->*drain_aware_detail::trySpeculative())[boost::asio::detail::epoll_reactor::read_op];
}

// Re-arms the socket's epoll registration (EPOLL_CTL_MOD with the events it
// has), as Asio does for a read started without a try: the kernel then
// reports what is ready now. An end of stream that came with the bytes a
// drain-aware read took raised its event before that read, and the read
// after it waits for an event that will not come; re-armed, the socket
// reports it. One system call; nothing happens when nothing is there. On the
// thread that runs the socket's io_context (see skipNextReadTry).
inline void rearmRead(tcp::socket& socket) {
    namespace dd = drain_aware_detail;
    auto& impl = dd::SocketImpl::of(socket).get_implementation();
    dd::DescriptorState* state = impl.reactor_data_;
    if (state == nullptr || impl.socket_ < 0) return;
    const uint32_t events = state->*dd::registeredEvents();
    if (events == 0) return;  // not registered with epoll (Asio then completes reads at once)
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = state;
    ::epoll_ctl((state->*dd::reactorOf())->*dd::epollFd(), EPOLL_CTL_MOD, impl.socket_, &ev);
}

}  // namespace dpgate::gateway
