// The operators' listener (separate port, loopback by default, the admin
// token): status, metrics and each backend's proxied metrics, flip, drain
// and reload.
#pragma once

#include "gateway/metrics/backend_metrics.hpp"
#include "gateway/net/net.hpp"
#include "gateway/ops/operator_actions.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::gateway {

class AdminListener {
public:
    AdminListener(net::io_context& io, AdminPieces pieces, const StatusReadings& readings, OperatorActions& actions);
    uint16_t listen(const tcp::endpoint& endpoint);
    void start();
    void stop();

    // POST /admin/flip: the backend to make primary (empty: the standby) and,
    // when given, the backend the operator believes is the primary now.
    // "by" names who flips (the flip log and state keep it; default
    // "admin@<peer address>"); "force" skips the acceptance-record check
    // (never the live health, model and window check).
    struct FlipRequest {
        std::string_view to;
        std::optional<std::string_view> expect_primary;
        std::string by;
        bool force = false;
    };

private:
    awaitable<void> acceptLoop();
    awaitable<void> serve(tcp::socket socket);
    awaitable<http::response<http::string_body>> answer(const http::request<http::string_body>& request,
                                                        const std::string& peer);
    http::response<http::string_body> status() const;
    // Fetches each backend's /metrics for status()'s per-rank table, at most
    // once a second per backend (monitors poll status often).
    awaitable<void> refreshRankTables();
    awaitable<http::response<http::string_body>> flip(const FlipRequest& flip_request);
    awaitable<http::response<http::string_body>> drain(std::string_view name, bool drained);
    http::response<http::string_body> metricsPage() const;
    awaitable<http::response<http::string_body>> backendMetrics(std::string_view name);

    net::io_context& io_;
    AdminPieces pieces_;
    const StatusReadings& readings_;
    OperatorActions& actions_;
    tcp::acceptor acceptor_{io_};

    struct RankTable {
        bool fetched = false;
        std::chrono::steady_clock::time_point at;
        metrics::BackendRankTable table;
        std::string error;  // why the last fetch failed; empty when it worked
    };
    std::vector<RankTable> rank_tables_;  // per backend index; only touched on io_'s thread
};

}  // namespace dpgate::gateway
