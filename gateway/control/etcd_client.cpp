#include "gateway/control/etcd_client.hpp"

#include "conf/backend_url.hpp"
#include "gateway/net/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/http/buffer_body.hpp>

#include <algorithm>
#include <stdexcept>

namespace dpgate::gateway::control {

namespace ssl = boost::asio::ssl;
using Clock = std::chrono::steady_clock;

namespace {

// An answer of etcd larger than this is not one dpgate asked for.
constexpr size_t kBodyLimit = 64u << 20;
// One object of a stream (a watch's batch of events): each holds at most a
// few state values.
constexpr size_t kStreamObjectLimit = 16u << 20;

// grpc-gateway's codes for "try another member": Unavailable, DeadlineExceeded.
bool anotherMemberMayAnswer(int code) { return code == 14 || code == 4; }

std::shared_ptr<ssl::context> clientTlsContext(const conf::EtcdConfig& config) {
    return makeClientTlsContext("control.etcd", config.ca_file, config.cert_file, config.key_file);
}

}  // namespace

int64_t EtcdReply::revision() const {
    auto header = body.find("header");
    return header == body.end() ? 0 : readInt64(*header, "revision");
}

// One connection to one endpoint, plain or TLS.
struct EtcdClient::Connection {
    explicit Connection(net::io_context& io) : tcp(io) {}
    beast::tcp_stream tcp;
    std::unique_ptr<ssl::stream<beast::tcp_stream&>> tls;
    beast::flat_buffer buffer;
    std::string host;  // "host:port", for the Host field

    // `op(stream)` on whichever stream carries the bytes.
    template <class Op>
    auto with(Op op) {
        return tls ? op(*tls) : op(tcp);
    }
    void expiresAfter(uint64_t timeout_ms) {
        if (timeout_ms) tcp.expires_after(ms(timeout_ms));
        else tcp.expires_never();
    }
};

EtcdClient::EtcdClient(net::io_context& io, const conf::EtcdConfig& config, std::string password)
    : io_(io), config_(config), password_(std::move(password)) {
    bool any_tls = std::any_of(config_.endpoints.begin(), config_.endpoints.end(),
                               [](const std::string& url) { return url.starts_with("https://"); });
    if (any_tls) tls_ = clientTlsContext(config_);
}

EtcdClient::~EtcdClient() = default;

awaitable<std::unique_ptr<EtcdClient::Connection>> EtcdClient::connect(size_t endpoint, std::string& error) {
    const std::string& url = config_.endpoints[endpoint];
    std::optional<conf::BackendUrl> parsed = conf::parseBackendUrl(url);
    if (!parsed) {
        error = url + ": not an endpoint URL";
        co_return nullptr;
    }
    auto connection = std::make_unique<Connection>(io_);
    connection->host = parsed->host + ":" + std::to_string(parsed->port);
    connection->expiresAfter(config_.dial_timeout_ms);
    tcp::resolver resolver(io_);
    auto [rec, found] = co_await resolver.async_resolve(parsed->host, std::to_string(parsed->port), use_nothrow);
    if (rec) {
        error = url + ": cannot resolve: " + rec.message();
        co_return nullptr;
    }
    auto [cec, at] = co_await connection->tcp.async_connect(found, use_nothrow);
    if (cec) {
        error = url + ": connect: " + cec.message();
        co_return nullptr;
    }
    connection->tcp.socket().set_option(tcp::no_delay(true));
    if (parsed->scheme == "https") {
        connection->tls = std::make_unique<ssl::stream<beast::tcp_stream&>>(connection->tcp, *tls_);
        SSL_set_tlsext_host_name(connection->tls->native_handle(), parsed->host.c_str());
        connection->tls->set_verify_callback(ssl::host_name_verification(parsed->host));
        auto [hec] = co_await connection->tls->async_handshake(ssl::stream_base::client, use_nothrow);
        if (hec) {
            error = url + ": TLS handshake: " + hec.message();
            co_return nullptr;
        }
    }
    co_return connection;
}

namespace {

http::request<http::string_body> postRequest(std::string_view host, std::string_view path, std::string body,
                                             const std::string& token) {
    http::request<http::string_body> request{http::verb::post, path, 11};
    request.set(http::field::host, host);
    request.set(http::field::content_type, "application/json");
    if (!token.empty()) request.set(http::field::authorization, token);
    request.body() = std::move(body);
    request.prepare_payload();
    return request;
}

// etcd's error answer: {"error": "...", "code": N, "message": "..."}.
EtcdReply errorReply(unsigned status, std::string_view body) {
    EtcdReply reply;
    nlohmann::json error = nlohmann::json::parse(body, nullptr, false);
    std::string message;
    int code = -1;
    if (error.is_object()) {
        if (auto m = error.find("message"); m != error.end() && m->is_string()) message = m->get<std::string>();
        if (auto c = error.find("code"); c != error.end() && c->is_number_integer()) code = c->get<int>();
    }
    if (message.empty()) message = std::string(body.substr(0, 200));
    reply.error = "etcd answered " + std::to_string(status) + ": " + message;
    reply.unreachable = anotherMemberMayAnswer(code) || status == 503;
    reply.code = code;
    return reply;
}

// Outside the coroutines (GCC 12 and braced JSON in a coroutine body).
std::string credentials(const std::string& name, const std::string& password) {
    return nlohmann::json{{"name", name}, {"password", password}}.dump();
}

bool unauthenticated(const EtcdReply& reply) { return !reply.ok && reply.code == 16; }

}  // namespace

awaitable<EtcdReply> EtcdClient::authenticate(size_t endpoint) {
    token_.clear();
    const std::string body = credentials(config_.username, password_);
    EtcdReply reply = co_await callOnce("/v3/auth/authenticate", body, endpoint);
    if (reply.ok) {
        auto token = reply.body.find("token");
        if (token != reply.body.end() && token->is_string()) token_ = token->get<std::string>();
        else {
            reply.ok = false;
            reply.error = "etcd gave no token for user " + config_.username;
        }
    }
    co_return reply;
}

awaitable<EtcdReply> EtcdClient::callOnce(std::string_view path, const std::string& body, size_t endpoint) {
    EtcdReply reply;
    reply.unreachable = true;
    std::unique_ptr<Connection> connection = co_await connect(endpoint, reply.error);
    if (!connection) co_return reply;
    connection->expiresAfter(config_.request_timeout_ms);
    auto request = postRequest(connection->host, path, body, token_);
    auto [wec, written] =
        co_await connection->with([&](auto& stream) { return http::async_write(stream, request, use_nothrow); });
    if (wec) {
        reply.error = config_.endpoints[endpoint] + ": POST " + std::string(path) + ": " + wec.message();
        co_return reply;
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(kBodyLimit);
    auto [rec, read] = co_await connection->with(
        [&](auto& stream) { return http::async_read(stream, connection->buffer, parser, use_nothrow); });
    if (rec) {
        reply.error = config_.endpoints[endpoint] + ": POST " + std::string(path) + ": " + rec.message();
        co_return reply;
    }
    const auto& response = parser.get();
    if (response.result() != http::status::ok) {
        EtcdReply error = errorReply(response.result_int(), response.body());
        error.error = config_.endpoints[endpoint] + ": " + error.error;
        co_return error;
    }
    reply.body = nlohmann::json::parse(response.body(), nullptr, false);
    if (!reply.body.is_object()) {
        reply.error = config_.endpoints[endpoint] + ": POST " + std::string(path) + ": not a JSON object";
        reply.unreachable = false;
        co_return reply;
    }
    reply.ok = true;
    reply.unreachable = false;
    co_return reply;
}

awaitable<EtcdReply> EtcdClient::call(std::string_view path, const nlohmann::json& body) {
    const std::string text = body.dump();
    const size_t n = config_.endpoints.size();
    EtcdReply last;
    last.unreachable = true;
    std::string errors;
    for (size_t tried = 0; tried < n; ++tried) {
        const size_t endpoint = (preferred_ + tried) % n;
        if (!config_.username.empty() && token_.empty()) {
            EtcdReply auth = co_await authenticate(endpoint);
            if (!auth.ok) {
                last = auth;
                errors += (errors.empty() ? "" : "; ") + auth.error;
                if (auth.unreachable) continue;
                // A wrong password is not fixed by another member; etcd is
                // as unusable as when it is down, and said so.
                auth.unreachable = true;
                co_return auth;
            }
        }
        EtcdReply reply = co_await callOnce(path, text, endpoint);
        if (unauthenticated(reply) && !config_.username.empty()) {  // the token expired
            EtcdReply auth = co_await authenticate(endpoint);
            if (auth.ok) reply = co_await callOnce(path, text, endpoint);
        }
        if (reply.ok || !reply.unreachable) {
            preferred_ = endpoint;
            co_return reply;
        }
        errors += (errors.empty() ? "" : "; ") + reply.error;
        last = std::move(reply);
    }
    last.error = errors.empty() ? "no etcd endpoint" : errors;
    co_return last;
}

class EtcdClient::StreamImpl final : public EtcdClient::Stream {
public:
    StreamImpl(std::unique_ptr<Connection> connection, uint64_t idle_timeout_ms)
        : connection_(std::move(connection)), idle_timeout_ms_(idle_timeout_ms) {
        parser_.body_limit(boost::none);
    }

    awaitable<bool> start(http::request<http::string_body>& request, std::string& error) {
        auto [wec, written] =
            co_await connection_->with([&](auto& stream) { return http::async_write(stream, request, use_nothrow); });
        if (wec) {
            error = "POST " + std::string(request.target()) + ": " + wec.message();
            co_return false;
        }
        auto [rec, read] = co_await connection_->with(
            [&](auto& stream) { return http::async_read_header(stream, connection_->buffer, parser_, use_nothrow); });
        if (rec) {
            error = "POST " + std::string(request.target()) + ": " + rec.message();
            co_return false;
        }
        if (parser_.get().result() != http::status::ok) {
            error = "POST " + std::string(request.target()) + ": etcd answered " +
                    std::to_string(parser_.get().result_int());
            co_return false;
        }
        co_return true;
    }

    awaitable<std::optional<nlohmann::json>> next() override {
        while (!closed_) {
            if (size_t end = pending_.find('\n'); end != std::string::npos) {
                nlohmann::json object =
                    nlohmann::json::parse(std::string_view(pending_).substr(0, end), nullptr, false);
                pending_.erase(0, end + 1);
                if (object.is_discarded()) {
                    error_ = "a stream object that is not JSON";
                    break;
                }
                co_return object;
            }
            if (pending_.size() > kStreamObjectLimit) {
                error_ = "a stream object over " + std::to_string(kStreamObjectLimit) + " bytes";
                break;
            }
            if (parser_.is_done()) {
                error_ = "the stream ended";
                break;
            }
            char chunk[16384];
            parser_.get().body().data = chunk;
            parser_.get().body().size = sizeof chunk;
            connection_->expiresAfter(idle_timeout_ms_);
            auto [ec, read] = co_await connection_->with(
                [&](auto& stream) { return http::async_read_some(stream, connection_->buffer, parser_, use_nothrow); });
            pending_.append(chunk, sizeof chunk - parser_.get().body().size);
            if (ec && ec != http::error::need_buffer) {
                error_ = closed_ ? "closed" : ec.message();
                break;
            }
        }
        closed_ = true;
        co_return std::nullopt;
    }

    const std::string& error() const override { return error_; }

    void close() override {
        if (closed_) return;
        closed_ = true;
        boost::system::error_code ignored;
        connection_->tcp.socket().shutdown(tcp::socket::shutdown_both, ignored);
        connection_->tcp.cancel();
    }

private:
    std::unique_ptr<Connection> connection_;
    uint64_t idle_timeout_ms_;
    http::response_parser<http::buffer_body> parser_;
    std::string pending_;
    std::string error_;
    bool closed_ = false;
};

awaitable<std::unique_ptr<EtcdClient::Stream>> EtcdClient::open(std::string_view path, const nlohmann::json& body,
                                                                uint64_t idle_timeout_ms, EtcdReply& failure) {
    const size_t n = config_.endpoints.size();
    std::string errors;
    failure = {};
    failure.unreachable = true;
    for (size_t tried = 0; tried < n; ++tried) {
        const size_t endpoint = (preferred_ + tried) % n;
        if (!config_.username.empty() && token_.empty()) {
            EtcdReply auth = co_await authenticate(endpoint);
            if (!auth.ok) {
                errors += (errors.empty() ? "" : "; ") + auth.error;
                continue;
            }
        }
        std::string error;
        std::unique_ptr<Connection> connection = co_await connect(endpoint, error);
        if (connection) {
            connection->expiresAfter(config_.request_timeout_ms);
            auto request = postRequest(connection->host, path, body.dump(), token_);
            auto stream = std::make_unique<StreamImpl>(std::move(connection), idle_timeout_ms);
            if (co_await stream->start(request, error)) {
                preferred_ = endpoint;
                co_return stream;
            }
            error = config_.endpoints[endpoint] + ": " + error;
        }
        errors += (errors.empty() ? "" : "; ") + error;
    }
    failure.error = errors.empty() ? "no etcd endpoint" : errors;
    co_return nullptr;
}

}  // namespace dpgate::gateway::control
