// A TCP socket with a deadline for the operations in flight, the contract of
// beast::tcp_stream (an operation still pending when its deadline passes
// fails with beast::error::timeout, and the socket is closed), kept without a
// timer per operation.
//
// beast::tcp_stream arms and cancels a timer around every read and write,
// which costs a timer-queue update, a cancelled completion and often a
// timerfd_settime per operation: on a small proxied request that is a tenth
// of the gateway's CPU. Here a deadline is a time stored in the socket, and
// each worker sweeps its sockets a few times a second (DeadlineList::sweep):
// deadlines are as exact as the sweep period, which is far finer than any
// timeout the gateway has.
#pragma once

#include "gateway/net/drain_aware_read.hpp"
#include "gateway/net/net.hpp"
#include "gateway/platform/coarse_clock.hpp"

#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace dpgate::gateway {

class TimedSocket;

// The sockets of one worker, in an intrusive list: linking and unlinking is
// a few pointer writes, and the sweep walks them all. One thread only.
class DeadlineList {
public:
    DeadlineList() = default;
    DeadlineList(const DeadlineList&) = delete;
    DeadlineList& operator=(const DeadlineList&) = delete;

    // Expires every socket whose deadline has passed with an operation pending.
    // Returns how many it expired.
    size_t sweep(std::chrono::steady_clock::time_point now);
    size_t size() const { return size_; }

private:
    friend class TimedSocket;
    void link(TimedSocket* socket);
    void unlink(TimedSocket* socket);

    TimedSocket* head_ = nullptr;
    size_t size_ = 0;
};

class TimedSocket {
public:
    using executor_type = tcp::socket::executor_type;
    using lowest_layer_type = tcp::socket;
    using clock = std::chrono::steady_clock;

    TimedSocket(DeadlineList& list, tcp::socket socket) : list_(list), socket_(std::move(socket)) { list_.link(this); }
    TimedSocket(DeadlineList& list, net::io_context& io) : list_(list), socket_(io) { list_.link(this); }
    ~TimedSocket() { list_.unlink(this); }
    TimedSocket(const TimedSocket&) = delete;
    TimedSocket& operator=(const TimedSocket&) = delete;

    executor_type get_executor() noexcept { return socket_.get_executor(); }
    tcp::socket& socket() noexcept { return socket_; }
    lowest_layer_type& lowest_layer() noexcept { return socket_; }

    // The deadline applies to the operations pending now or started later,
    // until the next call; as with beast::tcp_stream it does not run while
    // nothing is pending.
    void expires_after(clock::duration timeout) { deadline_ = deadlineNow() + timeout; }
    void expires_never() { deadline_ = clock::time_point::max(); }
    bool timedOut() const { return timed_out_; }

    void close() {
        error_code ignored;
        socket_.close(ignored);
    }

    // From now on a single-buffer read is drain-aware (startRead,
    // drain_aware_read.hpp): after a short read the next read waits for
    // readiness instead of failing a recv() first. For the client side
    // only: an end of stream that came with the bytes of a short read is
    // then seen at the next deadline, not at once (see there).
    void readDrainAware() { drain_aware_ = true; }

    // Drain-aware reads (on) or Asio's (off) for a backend's answer, with
    // the end of stream checked: a read still waiting after kRecheckSweeps
    // sweeps (a second, at a worker's 100 ms) has the socket re-armed
    // (rearmRead, drain_aware_read.hpp), so a backend that died right after
    // its last bytes is seen within about a second instead of at the
    // deadline. On only where the bytes tell the answer's end (chunked or a
    // length): a body that runs to the close would otherwise end a second
    // late.
    void readDrainAwareChecked(bool on) { drain_aware_ = checked_ = on; }
    static constexpr uint8_t kRecheckSweeps = 10;

    // The next read waits for the socket's next epoll event before it tries
    // a recv() (skipNextReadTry, drain_aware_read.hpp). For the first read
    // of an answer, right after its request was written whole with no turn
    // of the event loop since: nothing of the answer can be there yet, and
    // whatever the peer does in reply (the answer; the reset of a
    // connection it had closed while it sat idle) raises a new event. Asio
    // would try the recv() first, and it fails: one failed system call per
    // proxied request, which HAProxy and nginx do not make (counted in
    // docs/BENCHMARKS.md).
    void waitBeforeNextRead() { skipNextReadTry(socket_, read_path_); }

    // How reads are made (drain_aware_read.hpp): the process's choice
    // unless a test sets one, before the first read.
    void setReadPath(ReadPath path) { read_path_ = path; }
    ReadPath readPath() const { return read_path_; }

    template <class MutableBuffers, class Token>
    auto async_read_some(const MutableBuffers& buffers, Token&& token) {
        return net::async_initiate<Token, void(error_code, std::size_t)>(
            [this](auto handler, const MutableBuffers& b) {
                using Handler = Done<std::decay_t<decltype(handler)>>;
                quiet_sweeps_ = 0;
                if constexpr (std::is_convertible_v<const MutableBuffers&, net::mutable_buffer>) {
                    startRead(socket_, net::mutable_buffer(b), drain_aware_, Handler(*this, std::move(handler)),
                              read_path_);
                } else {
                    socket_.async_read_some(b, Handler(*this, std::move(handler)));
                }
            },
            token, buffers);
    }

    template <class ConstBuffers, class Token>
    auto async_write_some(const ConstBuffers& buffers, Token&& token) {
        return net::async_initiate<Token, void(error_code, std::size_t)>(
            [this](auto handler, const ConstBuffers& b) {
                socket_.async_write_some(b, Done<std::decay_t<decltype(handler)>>(*this, std::move(handler)));
            },
            token, buffers);
    }

    template <class Token>
    auto async_connect(const tcp::endpoint& endpoint, Token&& token) {
        return net::async_initiate<Token, void(error_code)>(
            [this](auto handler, const tcp::endpoint& e) {
                socket_.async_connect(e, Done<std::decay_t<decltype(handler)>>(*this, std::move(handler)));
            },
            token, endpoint);
    }

    // The completion of one operation: counts it as pending until it runs,
    // and reports a failure caused by the deadline as beast::error::timeout.
    // Associated executor, allocator and cancellation slot are the wrapped
    // handler's (see the associator below).
    template <class Handler>
    struct Done {
        TimedSocket* socket;
        Handler handler;

        Done(TimedSocket& s, Handler h) : socket(&s), handler(std::move(h)) { ++socket->pending_; }
        Done(Done&& other) noexcept : socket(std::exchange(other.socket, nullptr)), handler(std::move(other.handler)) {}
        Done(const Done&) = delete;

        template <class... Args>
        void operator()(error_code ec, Args&&... args) {
            TimedSocket* s = std::exchange(socket, nullptr);
            --s->pending_;
            if (ec && s->timed_out_) ec = beast::error::timeout;
            std::move(handler)(ec, std::forward<Args>(args)...);
        }
    };

private:
    friend class DeadlineList;

    void expire() {
        timed_out_ = true;
        close();
    }

    // Counts the sweeps an operation has been pending since the last read
    // started; at kRecheckSweeps the socket is re-armed, and again each
    // kRecheckSweeps after.
    void recheckEnd() {
        if (++quiet_sweeps_ < kRecheckSweeps) return;
        quiet_sweeps_ = 0;
        rearmRead(socket_, read_path_);
    }

    DeadlineList& list_;
    tcp::socket socket_;
    clock::time_point deadline_ = clock::time_point::max();
    int pending_ = 0;
    bool timed_out_ = false;
    bool drain_aware_ = false;
    bool checked_ = false;
    uint8_t quiet_sweeps_ = 0;  // recheckEnd
    ReadPath read_path_ = defaultReadPath();
    TimedSocket* prev_ = nullptr;
    TimedSocket* next_ = nullptr;
};

inline void DeadlineList::link(TimedSocket* socket) {
    socket->next_ = head_;
    if (head_) head_->prev_ = socket;
    head_ = socket;
    ++size_;
}

inline void DeadlineList::unlink(TimedSocket* socket) {
    if (socket->prev_) socket->prev_->next_ = socket->next_;
    else head_ = socket->next_;
    if (socket->next_) socket->next_->prev_ = socket->prev_;
    socket->prev_ = socket->next_ = nullptr;
    --size_;
}

inline size_t DeadlineList::sweep(std::chrono::steady_clock::time_point now) {
    size_t expired = 0;
    for (TimedSocket* s = head_; s != nullptr; s = s->next_) {
        if (s->pending_ == 0 || s->timed_out_) continue;
        if (now >= s->deadline_) {
            s->expire();
            ++expired;
        } else if (s->checked_) {
            s->recheckEnd();
        }
    }
    return expired;
}

}  // namespace dpgate::gateway

namespace boost::asio {

template <template <class, class> class Associator, class Handler, class Default>
struct associator<Associator, dpgate::gateway::TimedSocket::Done<Handler>, Default> : Associator<Handler, Default> {
    static typename Associator<Handler, Default>::type get(
        const dpgate::gateway::TimedSocket::Done<Handler>& done) noexcept {
        return Associator<Handler, Default>::get(done.handler);
    }
    static auto get(const dpgate::gateway::TimedSocket::Done<Handler>& done, const Default& fallback) noexcept
        -> decltype(Associator<Handler, Default>::get(done.handler, fallback)) {
        return Associator<Handler, Default>::get(done.handler, fallback);
    }
};

}  // namespace boost::asio
