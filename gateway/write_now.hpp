// A write that first tries the socket right away.
//
// An asynchronous write whose bytes the socket takes at once (nearly every
// small request and answer) still goes through the reactor: an operation
// object, a posted completion, a turn of the scheduler and a coroutine
// resumption, for a send the kernel finished in the first attempt (issue
// 18: Asio's machinery was a quarter of dpgate's user time). WriteNow makes
// that first attempt itself, non-blocking; the caller awaits an ordinary
// async_write only for what the socket did not take:
//
//     WriteNow now(&socket, buffers);
//     if (!now.done()) co_await net::async_write(stream, now.rest(), ...);
//
// A failed attempt writes nothing and leaves the error to the async write,
// which meets it again and reports it as before.
#pragma once

#include "gateway/net.hpp"

#include <boost/beast/core/buffers_suffix.hpp>

namespace dpgate::gateway {

template <class Buffers>
class WriteNow {
public:
    // `socket` null: nothing is tried (a TLS stream, whose bytes are not
    // the socket's to write).
    WriteNow(tcp::socket* socket, const Buffers& buffers) : rest_(buffers) {
        const size_t total = net::buffer_size(buffers);
        size_t sent = 0;
        if (socket != nullptr && total != 0) {
            error_code ec;
            // Set once per socket: Asio's async operations work the same either way.
            if (!socket->non_blocking()) socket->non_blocking(true, ec);
            if (!ec) sent = socket->send(buffers, 0, ec);
            if (ec) sent = 0;
        }
        rest_.consume(sent);
        done_ = sent == total;
    }

    bool done() const { return done_; }
    const beast::buffers_suffix<Buffers>& rest() const { return rest_; }

private:
    beast::buffers_suffix<Buffers> rest_;
    bool done_ = false;
};

}  // namespace dpgate::gateway
