// A write that first tries the socket right away.
//
// An asynchronous write whose bytes the socket takes at once (nearly every
// small request and answer) still goes through the reactor: an operation
// object, a posted completion, a turn of the scheduler and a coroutine
// resumption, for a send the kernel finished in the first attempt (when
// every write goes through it, Asio's machinery is a quarter of dpgate's
// user time). WriteNow makes that first attempt itself, non-blocking; the
// caller awaits an ordinary async_write only for what the socket did not
// take:
//
//     WriteNow now(&socket, buffers);
//     if (!now.done()) ec = co_await writeRest(stream, now);
//
// writeRest() is a coroutine of its own, so the caller's coroutine frame
// holds no copy of the buffers across the wait: the frame is memory held
// per request in flight (tests/bench/proxy/frame_sizes.py).
//
// A failed attempt writes nothing and leaves the error to the async write,
// which meets it again and reports it as before.
//
// A small write of several pieces (a head and a body) is copied into one
// piece and sent with send(), not sendmsg(): the kernel then neither copies
// in nor walks an iovec array, whose entries here are often empty.
//
// The fast path write_now (common/fast_paths.hpp). Its plain twin is the
// async write alone: with the fast path off (or `try_now` false) nothing
// is tried and rest() is every byte; write_now_test sends both ways.
#pragma once

#include "common/fast_paths.hpp"
#include "gateway/net/net.hpp"
#include "gateway/platform/uncancellable_io.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>

#include <sys/socket.h>

#include <array>

namespace dpgate::gateway {

template <class Buffers>
class WriteNow {
public:
    // `socket` null: nothing is tried (a TLS stream, whose bytes are not
    // the socket's to write).
    // `buffers` must outlive the WriteNow (and its rest()): a temporary is refused.
    WriteNow(tcp::socket* socket, const Buffers& buffers, bool try_now = fastPathOn(FastPath::write_now))
        : buffers_(buffers) {
        const size_t total = net::buffer_size(buffers);
        size_t sent = 0;
        if (socket != nullptr && total != 0 && try_now) {
            error_code ec;
            // Set once per socket: Asio's async operations work the same either way.
            if (!socket->non_blocking()) socket->non_blocking(true, ec);
            if (!ec)
                sent = total <= kGatherBytes ? sendGathered(*socket, buffers, total) : socket->send(buffers, 0, ec);
            if (ec) sent = 0;
        }
        sent_ = sent;
        done_ = sent == total;
    }

    WriteNow(tcp::socket* socket, Buffers&& buffers, bool try_now = true) = delete;

    bool done() const { return done_; }
    // What the socket did not take.
    beast::buffers_suffix<Buffers> rest() const {
        beast::buffers_suffix<Buffers> rest(buffers_);
        rest.consume(sent_);
        return rest;
    }

private:
    static constexpr size_t kGatherBytes = 8192;

    // The pieces in one send(); 0 when the socket took nothing or failed.
    static size_t sendGathered(tcp::socket& socket, const Buffers& buffers, size_t total) {
        thread_local std::array<char, kGatherBytes> gathered;
        const char* data = nullptr;
        size_t pieces = 0;
        for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers); ++it) {
            const net::const_buffer piece(*it);
            if (piece.size() == 0) continue;
            if (pieces++ == 0) data = static_cast<const char*>(piece.data());
        }
        if (pieces > 1) {
            net::buffer_copy(net::buffer(gathered.data(), total), buffers);
            data = gathered.data();
        }
        const ssize_t n = sendUncancellable(socket.native_handle(), data, total, MSG_NOSIGNAL);
        return n > 0 ? size_t(n) : 0;
    }

    const Buffers& buffers_;
    size_t sent_ = 0;
    bool done_ = false;
};

// The rest of a write that `now` began, written asynchronously.
template <class Stream, class Buffers>
awaitable<error_code> writeRest(Stream& stream, const WriteNow<Buffers>& now) {
    auto [ec, n] = co_await net::async_write(stream, now.rest(), use_nothrow);
    co_return ec;
}

}  // namespace dpgate::gateway
