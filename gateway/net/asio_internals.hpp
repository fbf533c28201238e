// Every use of Asio's private internals in dpgate: boost/asio/detail, and
// the protected and private members of Asio's socket, socket service and
// epoll reactor. They are Boost 1.81's layout, so all of it is compiled only
// for that version (DPGATE_ASIO_INTERNALS); with any other Boost, and when
// DPGATE_PLAIN turns the fast paths drain_aware_read and accepted_socket
// off, their callers (drain_aware_read.hpp, accepted_socket.hpp) take the
// public fallback beside each use, which is compiled in every build and run
// by the same unit tests (tests/unit/gateway/net/).
//
// What the internals buy:
// - startRead: a socket read built from Asio's reactor operation interface
//   (reactor_op, handler_work, the socket service's start_op), as Asio's
//   own operations are, that can report the socket drained after a short
//   read (drain_aware_read.hpp says why), calls recv() without glibc's
//   cancellation bookkeeping (uncancellable_io.hpp), and runs a coroutine's
//   handler without handler_work's count of outstanding work (doComplete);
// - the reactor's per-socket record of whether the next read may try
//   recv() at once (setTryNextRead, mayHaveArrived), and its epoll
//   registration (rearmRead);
// - an accepted socket's possible-duplicate mark (forgetPossibleDup).
#pragma once

#include <boost/version.hpp>

#include "gateway/net/net.hpp"
#include "gateway/platform/uncancellable_io.hpp"

#if BOOST_VERSION == 108100
#define DPGATE_ASIO_INTERNALS 1

#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/memory.hpp>
#include <boost/asio/detail/reactive_socket_service_base.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/detail/socket_ops.hpp>

#include <sys/epoll.h>

#include <cassert>
#include <cerrno>
#include <cstdint>
#include <type_traits>
#include <utility>
#endif

namespace dpgate::gateway::asio_internals {

#ifdef DPGATE_ASIO_INTERNALS

inline constexpr bool kCompiled = true;

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
struct ServiceStart : ad::reactive_socket_service_base {
    static constexpr auto startOp = &ServiceStart::start_op;
};

// The reactor's per-socket record of whether the next read may try recv()
// at once (epoll_reactor::descriptor_state::try_speculative_, private: the
// reactor alone sets it, true on every epoll event, false after a read that
// drained the socket). An explicit instantiation may name a private member
// ([temp.spec.general]/6); the friend it defines hands the member pointer
// out.
using DescriptorState = ad::epoll_reactor::descriptor_state;
using TrySpeculative = bool (DescriptorState::*)[ad::epoll_reactor::max_ops];
TrySpeculative trySpeculative();
template <TrySpeculative Member>
struct ExposeTrySpeculative {
    friend TrySpeculative trySpeculative() { return Member; }
};
template struct ExposeTrySpeculative<&DescriptorState::try_speculative_>;

// The same for what rearmRead needs: the socket's reactor, the events it is
// registered for, and the reactor's epoll descriptor.
using ReactorOf = ad::epoll_reactor* DescriptorState::*;
using RegisteredEvents = uint32_t DescriptorState::*;
using EpollFd = int ad::epoll_reactor::*;
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
                                   &ad::epoll_reactor::epoll_fd_>;

// Starts a read of `buffer` on `socket`; `handler(error_code, size_t)` runs
// as for socket.async_read_some. `drain_aware`: a short read reports the
// socket drained (RecvOp::doPerform).
template <class Handler>
void startRead(tcp::socket& socket, net::mutable_buffer buffer, bool drain_aware, Handler handler) {
    using IoExecutor = tcp::socket::executor_type;
    using Op = RecvOp<Handler, IoExecutor>;
    auto& io = SocketImpl::of(socket);
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
    (service.*ServiceStart::startOp)(impl, ad::reactor::read_op, p.p, is_continuation,
                                     /*is_non_blocking=*/true, /*noop=*/buffer.size() == 0);
    p.v = p.p = nullptr;
}

// Sets whether the next read on `socket` may try recv() at once (true) or
// waits for the socket's next epoll event (false). On the thread that runs
// the socket's io_context, which locks nothing for the reactor's per-socket
// record (BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO) or else owns it.
inline void setTryNextRead(tcp::socket& socket, bool at_once) {
    auto& impl = SocketImpl::of(socket).get_implementation();
    if (impl.reactor_data_ != nullptr) (impl.reactor_data_->*trySpeculative())[ad::epoll_reactor::read_op] = at_once;
}

// Whether the reactor has handled any readiness of the socket since a read
// drained it (or the socket is not registered).
inline bool mayHaveArrived(tcp::socket& socket) {
    auto& impl = SocketImpl::of(socket).get_implementation();
    return impl.reactor_data_ == nullptr || (impl.reactor_data_->*trySpeculative())[ad::epoll_reactor::read_op];
}

// EPOLL_CTL_MOD with the events the socket is registered for: the kernel
// then reports what is ready now.
inline void rearmRead(tcp::socket& socket) {
    auto& impl = SocketImpl::of(socket).get_implementation();
    DescriptorState* state = impl.reactor_data_;
    if (state == nullptr || impl.socket_ < 0) return;
    const uint32_t events = state->*registeredEvents();
    if (events == 0) return;  // not registered with epoll (Asio then completes reads at once)
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = state;
    ::epoll_ctl((state->*reactorOf())->*epollFd(), EPOLL_CTL_MOD, impl.socket_, &ev);
}

// Asio marks an accepted descriptor as one that may have been duplicated,
// and takes it out of epoll by hand at close (EPOLL_CTL_DEL), where closing
// the only descriptor of a socket does it. Unmarked, the close does not.
inline void forgetPossibleDup(tcp::socket& socket) {
    SocketImpl::of(socket).get_implementation().state_ &= ~ad::socket_ops::possible_dup;
}
inline bool possibleDup(tcp::socket& socket) {
    return (SocketImpl::of(socket).get_implementation().state_ & ad::socket_ops::possible_dup) != 0;
}

#else

inline constexpr bool kCompiled = false;

#endif

}  // namespace dpgate::gateway::asio_internals
