// Active probes: every health.interval_ms each backend gets GET /health and
// GET /v1/models on a fresh connection (a probe must prove a new client can
// connect, not that an old socket still works). Results go to the registry.
#pragma once

#include "gateway/backends/backend_registry.hpp"
#include "gateway/net/net.hpp"

#include <functional>
#include <memory>

namespace dpgate::gateway {

class HealthChecker {
public:
    // `config_in_force` gives the config each round probes with (a reload
    // changes the interval and the timeouts).
    using ConfigInForce = std::function<const conf::Config&()>;
    HealthChecker(net::io_context& io, ConfigInForce config_in_force, BackendRegistry& registry);

    void start();
    void stop();  // on the io_context's thread

    // One probe of one backend, also used by the admin flip's identity check.
    static awaitable<ProbeResult> probe(const conf::BackendConfig& backend, const std::string& model_id,
                                        uint64_t timeout_ms);

    // One GET on a fresh connection (the admin API proxies /metrics with it).
    // Status 0 and `error` set when the backend could not be reached.
    struct Fetched {
        unsigned status = 0;
        std::string content_type;
        std::string server;  // the Server header
        std::string body;
        std::string error;
    };
    static awaitable<Fetched> fetch(const conf::BackendConfig& backend, const char* target, uint64_t timeout_ms);

    // Any request on a fresh connection (`dpgate accept` posts with it).
    struct Call {
        http::verb method = http::verb::get;
        std::string target;
        std::string body;  // sent as application/json unless GET
        std::vector<std::pair<std::string, std::string>> headers;
        uint64_t timeout_ms = 60000;
        size_t body_limit = 64 * 1024 * 1024;
    };
    static awaitable<Fetched> call(const conf::BackendConfig& backend, const Call& call);

private:
    awaitable<void> loop(size_t index);

    net::io_context& io_;
    ConfigInForce config_in_force_;
    BackendRegistry& registry_;
    std::vector<std::unique_ptr<net::steady_timer>> timers_;
    bool stopped_ = false;
};

}  // namespace dpgate::gateway
