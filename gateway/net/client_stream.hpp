// The client connection's byte stream: plain TCP, or TLS over it once the
// first bytes showed a TLS ClientHello. Beast's HTTP functions take it like
// any stream; deadlines and the socket belong to the TCP layer beneath.
#pragma once

#include "gateway/net/net.hpp"
#include "gateway/net/timed_socket.hpp"

#include <boost/beast/ssl/ssl_stream.hpp>

#include <optional>
#include <utility>

namespace dpgate::gateway {

class ClientStream {
public:
    using executor_type = TimedSocket::executor_type;
    using TlsStream = beast::ssl_stream<TimedSocket&>;

    // Reads wait for readiness after a short read (TimedSocket::readDrainAware):
    // between a keep-alive client's requests the socket is empty.
    ClientStream(DeadlineList& deadlines, tcp::socket socket) : tcp_(deadlines, std::move(socket)) {
        tcp_.readDrainAware();
    }

    executor_type get_executor() noexcept { return tcp_.get_executor(); }
    TimedSocket& tcpStream() { return tcp_; }
    tcp::socket& socket() { return tcp_.socket(); }
    void expires_after(std::chrono::steady_clock::duration timeout) { tcp_.expires_after(timeout); }

    bool secure() const { return tls_.has_value(); }
    // From now on bytes go through TLS (the handshake is the caller's).
    TlsStream& startTls(net::ssl::context& context) {
        tls_.emplace(tcp_, context);
        return *tls_;
    }

    template <class MutableBuffers, class Token>
    auto async_read_some(const MutableBuffers& buffers, Token&& token) {
        if (tls_) return tls_->async_read_some(buffers, std::forward<Token>(token));
        return tcp_.async_read_some(buffers, std::forward<Token>(token));
    }

    template <class ConstBuffers, class Token>
    auto async_write_some(const ConstBuffers& buffers, Token&& token) {
        if (tls_) return tls_->async_write_some(buffers, std::forward<Token>(token));
        return tcp_.async_write_some(buffers, std::forward<Token>(token));
    }

private:
    TimedSocket tcp_;
    std::optional<TlsStream> tls_;  // declared after tcp_: it refers to it
};

}  // namespace dpgate::gateway
