// The client listener's TLS settings: a server context from listen.tls.cert
// (a PEM chain, leaf first) and listen.tls.key. TLS 1.2 or newer, no
// compression, no renegotiation. Built at start and again on reload
// (SIGHUP), so a renewed certificate is served to new connections without a
// restart; connections already open keep the context they started with.
#pragma once

#include "conf/config.hpp"

#include <boost/asio/ssl/context.hpp>

#include <memory>

namespace dpgate::gateway {

// Throws std::runtime_error naming the file and OpenSSL's reason.
std::shared_ptr<boost::asio::ssl::context> makeServerTlsContext(const conf::TlsConfig& tls);

// A client context for dpgate's own stores (etcd, Redis): TLS 1.2 or newer,
// the server verified against `ca_file` (empty: the system's CAs), and a
// client certificate when `cert_file` is set (with `key_file`). Throws
// std::runtime_error naming `section` + ".tls.<field>", the file and the reason.
std::shared_ptr<boost::asio::ssl::context> makeClientTlsContext(const std::string& section, const std::string& ca_file,
                                                                const std::string& cert_file,
                                                                const std::string& key_file);

}  // namespace dpgate::gateway
