// The client connection's byte stream: plain TCP, or TLS over it once the
// first bytes showed a TLS ClientHello. Beast's HTTP functions take it like
// any stream; deadlines and the socket belong to the TCP layer beneath.
#pragma once

#include "gateway/net.hpp"

#include <boost/beast/ssl/ssl_stream.hpp>

#include <optional>
#include <utility>

namespace dpgate::gateway {

class ClientStream {
public:
    using executor_type = beast::tcp_stream::executor_type;
    using TlsStream = beast::ssl_stream<beast::tcp_stream>;

    explicit ClientStream(tcp::socket socket) : plain_(std::in_place, std::move(socket)) {}

    executor_type get_executor() noexcept { return tcpStream().get_executor(); }
    beast::tcp_stream& tcpStream() { return plain_ ? *plain_ : tls_->next_layer(); }
    tcp::socket& socket() { return tcpStream().socket(); }
    void expires_after(std::chrono::steady_clock::duration timeout) { tcpStream().expires_after(timeout); }

    bool secure() const { return tls_.has_value(); }
    // From now on bytes go through TLS (the handshake is the caller's).
    TlsStream& startTls(net::ssl::context& context) {
        tls_.emplace(std::move(*plain_), context);
        plain_.reset();
        return *tls_;
    }

    template <class MutableBuffers, class Token>
    auto async_read_some(const MutableBuffers& buffers, Token&& token) {
        if (tls_) return tls_->async_read_some(buffers, std::forward<Token>(token));
        return plain_->async_read_some(buffers, std::forward<Token>(token));
    }

    template <class ConstBuffers, class Token>
    auto async_write_some(const ConstBuffers& buffers, Token&& token) {
        if (tls_) return tls_->async_write_some(buffers, std::forward<Token>(token));
        return plain_->async_write_some(buffers, std::forward<Token>(token));
    }

private:
    std::optional<beast::tcp_stream> plain_;
    std::optional<TlsStream> tls_;
};

}  // namespace dpgate::gateway
