// nginx's lingering close, for a connection answered before its request's
// body was read (a refusal from the head: 401, 413, ...).
//
// Closing at once would have the kernel answer the bytes the client is still
// sending with a reset, and a reset can destroy the answer in the client's
// receive queue before the client reads it. So the send side closes first
// (the client reads the answer, then the end of the stream), what the client
// still sends is read and dropped until it closes too or `linger` passes,
// and then the connection closes.
#pragma once

#include "gateway/net/net.hpp"

#include <chrono>

namespace dpgate::gateway {

// `stream`: a TimedSocket or beast::tcp_stream (socket(), expires_after(),
// async_read_some()); `scratch` takes the dropped bytes.
template <class Stream>
awaitable<void> lingeringClose(Stream& stream, net::mutable_buffer scratch, std::chrono::milliseconds linger) {
    error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (!ec) {
        stream.expires_after(linger);
        while (true) {
            auto [read_ec, n] = co_await stream.async_read_some(scratch, use_nothrow);
            if (read_ec) break;
        }
    }
    stream.socket().close(ec);
}

}  // namespace dpgate::gateway
