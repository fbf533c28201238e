// A client of etcd's v3 JSON gateway (POST /v3/kv/range, /v3/kv/txn,
// /v3/watch, /v3/lease/...): HTTP/1.1 over Beast, TLS for https endpoints,
// password authentication. Runs on the control thread's io_context only
// (control_plane.hpp); nothing here is thread-safe.
//
// The endpoints are tried in turn, starting with the one that answered
// last; a call fails as `unreachable` only when none answered within
// request_timeout_ms. Keys and values travel base64-encoded, as the gateway
// wants them; Kv holds them decoded.
#pragma once

#include "conf/config.hpp"
#include "gateway/control/etcd_codec.hpp"
#include "gateway/net/net.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace boost::asio::ssl {
class context;
}

namespace dpgate::gateway::control {

struct EtcdReply {
    bool ok = false;
    bool unreachable = false;  // no endpoint answered (else etcd answered with an error)
    std::string error;         // what went wrong, for logs and status
    int code = -1;             // etcd's (gRPC's) error code, when it answered with one
    nlohmann::json body;       // the answer, when ok
    int64_t revision() const;  // header.revision
};

class EtcdClient {
public:
    EtcdClient(net::io_context& io, const conf::EtcdConfig& config, std::string password);
    ~EtcdClient();

    // One unary call: `path` like "/v3/kv/range".
    awaitable<EtcdReply> call(std::string_view path, const nlohmann::json& body);

    // A streaming call (watch, lease keepalive): the answer is a sequence of
    // JSON objects, each {"result": ...} or {"error": ...}, read one by one.
    class Stream {
    public:
        virtual ~Stream() = default;
        // The next object; nullopt when the stream ended or failed (`error()`).
        virtual awaitable<std::optional<nlohmann::json>> next() = 0;
        virtual const std::string& error() const = 0;
        // Ends it from the same thread: a pending next() returns nullopt.
        virtual void close() = 0;
    };
    // Null with `failure` set when no endpoint took it. `idle_timeout_ms`
    // bounds the wait for each object (0: none).
    awaitable<std::unique_ptr<Stream>> open(std::string_view path, const nlohmann::json& body, uint64_t idle_timeout_ms,
                                            EtcdReply& failure);

    const std::vector<std::string>& endpoints() const { return config_.endpoints; }

private:
    struct Connection;
    class StreamImpl;
    awaitable<EtcdReply> callOnce(std::string_view path, const std::string& body, size_t endpoint);
    awaitable<std::unique_ptr<Connection>> connect(size_t endpoint, std::string& error);
    awaitable<EtcdReply> authenticate(size_t endpoint);

    net::io_context& io_;
    conf::EtcdConfig config_;
    std::string password_;
    std::shared_ptr<boost::asio::ssl::context> tls_;
    std::string token_;  // from /v3/auth/authenticate; "" without a username
    size_t preferred_ = 0;
};

}  // namespace dpgate::gateway::control
