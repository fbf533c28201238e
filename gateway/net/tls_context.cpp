#include "gateway/net/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <stdexcept>
#include <string>

namespace dpgate::gateway {

namespace {

std::string openSslReason() {
    unsigned long code = ERR_get_error();
    if (code == 0) return "unknown error";
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    ERR_clear_error();
    return text;
}

}  // namespace

std::shared_ptr<boost::asio::ssl::context> makeServerTlsContext(const conf::TlsConfig& tls) {
    namespace ssl = boost::asio::ssl;
    auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
    SSL_CTX* native = context->native_handle();
    context->set_options(ssl::context::default_workarounds | ssl::context::no_compression |
                         ssl::context::single_dh_use);
    SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1)
        throw std::runtime_error("listen.tls: cannot require TLS 1.2: " + openSslReason());
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(native, tls.cert.c_str()) != 1)
        throw std::runtime_error("listen.tls.cert: " + tls.cert + ": " + openSslReason());
    if (SSL_CTX_use_PrivateKey_file(native, tls.key.c_str(), SSL_FILETYPE_PEM) != 1)
        throw std::runtime_error("listen.tls.key: " + tls.key + ": " + openSslReason());
    if (SSL_CTX_check_private_key(native) != 1)
        throw std::runtime_error("listen.tls.key: " + tls.key + " does not match the certificate " + tls.cert + ": " +
                                 openSslReason());
    return context;
}

std::shared_ptr<boost::asio::ssl::context> makeClientTlsContext(const std::string& section, const std::string& ca_file,
                                                                const std::string& cert_file,
                                                                const std::string& key_file) {
    namespace ssl = boost::asio::ssl;
    auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
    context->set_verify_mode(ssl::verify_peer);
    boost::system::error_code ec;
    auto check = [&](const char* field, const std::string& file) {
        if (ec) throw std::runtime_error(section + ".tls." + field + ": " + file + ": " + ec.message());
    };
    if (ca_file.empty()) context->set_default_verify_paths(ec);
    else context->load_verify_file(ca_file, ec);
    check("ca_file", ca_file);
    if (!cert_file.empty()) {
        context->use_certificate_chain_file(cert_file, ec);
        check("cert_file", cert_file);
        context->use_private_key_file(key_file, ssl::context::pem, ec);
        check("key_file", key_file);
    }
    return context;
}

}  // namespace dpgate::gateway
