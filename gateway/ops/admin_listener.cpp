#include "gateway/ops/admin_listener.hpp"

#include "admission/tokenizer/shared_segment_cache.hpp"
#include "common/api_error.hpp"
#include "gateway/acceptance/record_store.hpp"
#include "gateway/backends/backend_registry.hpp"
#include "gateway/backends/health_checker.hpp"
#include "gateway/backends/role_ledger.hpp"
#include "gateway/backends/router.hpp"
#include "gateway/budget/budgets.hpp"
#include "gateway/control/control_plane.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/net/lingering_close.hpp"
#include "gateway/ops/admin_page.hpp"
#include "gateway/path/admission_pool.hpp"
#include "gateway/path/count_check.hpp"
#include "gateway/path/gateway_metrics_page.hpp"
#include "gateway/platform/log.hpp"
#include "routing/work_meter.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

namespace dpgate::gateway {

AdminListener::AdminListener(net::io_context& io, AdminPieces pieces, const StatusReadings& readings,
                             OperatorActions& actions)
    : io_(io), pieces_(pieces), readings_(readings), actions_(actions) {}

uint16_t AdminListener::listen(const tcp::endpoint& endpoint) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    return acceptor_.local_endpoint().port();
}

void AdminListener::start() { net::co_spawn(io_, acceptLoop(), net::detached); }

void AdminListener::stop() {
    error_code ec;
    acceptor_.close(ec);
}

awaitable<void> AdminListener::acceptLoop() {
    while (acceptor_.is_open()) {
        auto [ec, socket] = co_await acceptor_.async_accept(use_nothrow);
        if (ec) {
            if (ec == net::error::operation_aborted || !acceptor_.is_open()) break;
            continue;
        }
        net::co_spawn(io_, serve(std::move(socket)), net::detached);
    }
}

namespace {

http::response<http::string_body> jsonResponse(unsigned status, const nlohmann::json& body) {
    http::response<http::string_body> response{static_cast<http::status>(status), 11};
    response.set(http::field::content_type, "application/json");
    // Backends' words (errors, server headers) may hold broken UTF-8.
    response.body() = body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    return response;
}

http::response<http::string_body> errorResponse(const ApiError& error) {
    http::response<http::string_body> response{static_cast<http::status>(error.http_status), 11};
    response.set(http::field::content_type, "application/json");
    response.body() = error.body();
    return response;
}

// Admin requests carry at most a small JSON body (a flip's names).
constexpr uint64_t kMaxAdminBodyBytes = 64 * 1024;

// What a client is told when its request could not be read, or nothing (it
// closed or went quiet): the same limits and words as the client listener's.
std::optional<ApiError> readRefusal(const error_code& ec, uint64_t max_header_bytes) {
    if (ec == http::error::body_limit)
        return ApiError::payloadTooLarge("admin request body exceeds " + std::to_string(kMaxAdminBodyBytes) +
                                         " bytes.");
    if (ec == http::error::header_limit)
        return ApiError::headerTooLarge("request header exceeds " + std::to_string(max_header_bytes) + " bytes.");
    if (ec.category() != http::make_error_code(http::error::bad_target).category() ||
        ec == http::error::end_of_stream || ec == http::error::partial_message)
        return std::nullopt;
    return ApiError::badRequest("malformed request: " + ec.message() + ".");
}

// Writes `response`, or only its head for HEAD (RFC 9110 9.3.2: the head
// GET would have, Content-Length included).
awaitable<error_code> writeAnswer(beast::tcp_stream& stream, http::response<http::string_body>& response,
                                  bool head_only) {
    if (head_only) {
        http::response_serializer<http::string_body> serializer(response);
        auto [ec, n] = co_await http::async_write_header(stream, serializer, use_nothrow);
        co_return ec;
    }
    auto [ec, n] = co_await http::async_write(stream, response, use_nothrow);
    co_return ec;
}

}  // namespace

awaitable<void> AdminListener::serve(tcp::socket socket) {
    error_code peer_ec;
    tcp::endpoint remote = socket.remote_endpoint(peer_ec);
    const std::string peer = peer_ec ? std::string("unknown") : remote.address().to_string();
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    const conf::LimitsConfig& limits = actions_.config().limits;
    while (true) {
        http::request_parser<http::string_body> parser;
        parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
        // A declared length over the limit fails at the end of the head, before a body byte.
        parser.body_limit(kMaxAdminBodyBytes);
        stream.expires_after(ms(limits.header_timeout_ms));
        auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_nothrow);
        if (ec) {
            const std::optional<ApiError> refusal = readRefusal(ec, limits.max_header_bytes);
            if (!refusal) break;
            http::response<http::string_body> response = errorResponse(*refusal);
            response.keep_alive(false);
            response.prepare_payload();
            const bool head_only = parser.is_header_done() && parser.get().method() == http::verb::head;
            stream.expires_after(ms(limits.client_write_timeout_ms));
            co_await writeAnswer(stream, response, head_only);
            const net::mutable_buffer scratch = buffer.prepare(4096);
            const std::chrono::milliseconds linger = ms(limits.linger_timeout_ms);
            co_await lingeringClose(stream, scratch, linger);
            co_return;
        }
        http::request<http::string_body> request = parser.release();
        http::response<http::string_body> response = co_await answer(request, peer);
        response.keep_alive(request.keep_alive());
        response.prepare_payload();
        stream.expires_after(ms(limits.client_write_timeout_ms));
        const error_code wec = co_await writeAnswer(stream, response, request.method() == http::verb::head);
        if (wec || !response.keep_alive()) break;
    }
    error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

awaitable<void> AdminListener::refreshRankTables() {
    BackendRegistry& backends = pieces_.backends;
    const conf::Config& config = actions_.config();
    rank_tables_.resize(config.backends.size());
    // A backend that fails its probes is not asked: a hung one would hold
    // every status answer for the fetch timeout.
    std::vector<BackendHealth> health(rank_tables_.size(), BackendHealth::unknown);
    for (const BackendView& b : backends.snapshot())
        if (std::optional<size_t> index = backends.find(b.name); index && *index < health.size())
            health[*index] = b.health;
    auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < rank_tables_.size(); ++i) {
        if (rank_tables_[i].fetched && now - rank_tables_[i].at < std::chrono::seconds(1)) continue;
        if (health[i] != BackendHealth::healthy) {
            const bool unknown = health[i] == BackendHealth::unknown;
            rank_tables_[i] = RankTable{true, now, {}, unknown ? "backend not probed yet" : "backend is not healthy"};
            continue;
        }
        HealthChecker::Fetched fetched =
            co_await HealthChecker::fetch(backends.config(i), "/metrics", config.health.timeout_ms);
        RankTable& entry = rank_tables_[i];
        entry.fetched = true;
        entry.at = std::chrono::steady_clock::now();
        if (fetched.status == 200) {
            entry.table = metrics::parseBackendMetrics(fetched.body);
            entry.error.clear();
        } else {
            entry.table = {};
            entry.error = fetched.status == 0 ? fetched.error : "answered " + std::to_string(fetched.status);
        }
    }
}

namespace {

nlohmann::json optionalNumber(const std::optional<double>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json optionalText(const std::string& value) {
    return value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
}

nlohmann::json flipJson(const acceptance::FlipEvent& f) {
    return {{"who", f.who}, {"at", f.at},         {"from", f.from},
            {"to", f.to},   {"forced", f.forced}, {"record", optionalText(f.record)}};
}

// What a flip or drain meets while etcd is away.
control::ControlOutcome storeAway(const control::ControlPlane& control) {
    return {control::ControlOutcome::Kind::unavailable, "etcd cannot be reached (" + control.lastError() + ")"};
}

// A flip or drain etcd did not take, as the operator's answer.
std::optional<http::response<http::string_body>> refusedChange(const control::ControlOutcome& outcome,
                                                               const std::string& what) {
    using Kind = control::ControlOutcome::Kind;
    switch (outcome.kind) {
        case Kind::done: return std::nullopt;
        case Kind::unavailable:
            return errorResponse(ApiError::unavailable(
                what + " refused: " + outcome.message + ". Traffic goes on with the roles last applied.",
                "control_store_unavailable", "server_error"));
        case Kind::conflict:
            return errorResponse(ApiError::conflict(what + " refused: " + outcome.message + ".", "flip_refused"));
        case Kind::refused:
            return errorResponse(ApiError::conflict(what + " refused: " + outcome.message + ".", "control_refused"));
    }
    return std::nullopt;
}

}  // namespace

http::response<http::string_body> AdminListener::status() const {
    BackendRegistry& backends = pieces_.backends;
    nlohmann::json list = nlohmann::json::array();
    auto now = std::chrono::steady_clock::now();
    for (const BackendView& b : backends.snapshot()) {
        size_t index = *backends.find(b.name);
        const RankTable* table =
            index < rank_tables_.size() && rank_tables_[index].fetched ? &rank_tables_[index] : nullptr;
        nlohmann::json ranks = nlohmann::json::array();
        for (uint32_t r = 0; r < backends.config(index).dp_ranks; ++r) {
            // dpgate's view of the slot, then the backend's own view of the rank.
            const metrics::BackendRankRow* row = table ? table->table.find(int(r)) : nullptr;
            const metrics::Gauge* in_flight = pieces_.metrics.inflight_requests.find({b.name, std::to_string(r)});
            ranks.push_back(
                {{"rank", r},
                 {"in_flight", in_flight ? in_flight->value() : 0},
                 {"queued_prefill_tokens", pieces_.router.queuedPrefill(index, r)},
                 {"recent_prefill_tokens", std::llround(pieces_.router.recentWork(index, r, now))},
                 {"running", optionalNumber(row ? row->running : std::nullopt)},
                 {"waiting", optionalNumber(row ? row->waiting : std::nullopt)},
                 {"kv_cache_usage", optionalNumber(row ? row->kv_cache_usage : std::nullopt)},
                 {"prefix_cache_hit_ratio", optionalNumber(row ? row->prefix_cache_hit_ratio : std::nullopt)}});
        }
        nlohmann::json backend_metrics = nullptr;
        if (table)
            backend_metrics = {
                {"age_ms", std::chrono::duration_cast<std::chrono::milliseconds>(now - table->at).count()},
                {"error", table->error.empty() ? nlohmann::json(nullptr) : nlohmann::json(table->error)},
                {"parse_errors", table->table.parse_errors}};
        // The identity it reports now, and its latest acceptance record.
        nlohmann::json identity = nullptr;
        if (b.identity.max_model_len != 0 || !b.identity.model_id.empty())
            identity = {{"model_id", b.identity.model_id},
                        {"window", b.identity.max_model_len},
                        {"version", optionalText(b.identity.version)},
                        {"server", optionalText(b.identity.server)}};
        nlohmann::json accepted = nullptr;
        const conf::BackendConfig& backend_config = backends.config(index);
        if (auto latest = pieces_.records.latest(backend_config.name, backend_config.url)) {
            nlohmann::json failed = nlohmann::json::array();
            for (const acceptance::CheckResult& c : latest->record.checks)
                if (!c.passed) failed.push_back(c.name);
            std::vector<std::string> differences = acceptance::identityDifferences(latest->record.identity, b.identity);
            accepted = {{"file", latest->file},
                        {"time", latest->record.time},
                        {"passed", latest->record.passed},
                        {"identity_match", differences.empty()},
                        {"identity_differences", differences},
                        {"failed", std::move(failed)},
                        {"window", latest->record.identity.max_model_len}};
        }
        list.push_back({{"name", b.name},
                        {"url", backends.config(index).url},
                        {"role", conf::toString(b.role)},
                        {"health", toString(b.health)},  // unknown, healthy or down
                        {"healthy", b.healthy},
                        {"probed", b.probed},
                        {"routable", backends.routable(index)},
                        {"drained", b.drained},
                        {"window", b.reported_window},
                        {"model_ids", b.model_ids},
                        {"last_error", b.last_error},
                        {"identity", std::move(identity)},
                        {"acceptance", std::move(accepted)},
                        {"accepted", b.accepted},
                        {"accepted_window", b.accepted_window},
                        {"backend_metrics", std::move(backend_metrics)},
                        {"slots", std::move(ranks)}});
    }
    nlohmann::json status = {{"model", actions_.config().model.id},
                             {"configured_window", actions_.config().model.window_tokens},
                             {"public_window", backends.publicWindow()},
                             {"routing_mode", conf::toString(actions_.config().routing.mode)},
                             {"open_connections", readings_.openConnections()},
                             {"requests_in_flight", readings_.requestsInFlight()},
                             {"last_count_mismatch", pieces_.count_check.lastMismatch()},
                             {"backends", std::move(list)}};
    // The segment counts the workers share: hits are turns of a conversation
    // counted on another worker (or by another admitter) before.
    const admission::SharedSegmentCache& cache = pieces_.shared_segments;
    const admission::SharedSegmentCache::Stats shared = cache.stats();
    status["shared_count_cache"] = {
        {"bytes", shared.bytes}, {"max_bytes", cache.maxBytes()}, {"hits", shared.hits}, {"misses", shared.misses}};
    RoleLedger::Source source = pieces_.roles.source();
    status["roles"] = {{"source", source.source},
                       {"since", source.since},
                       {"file", optionalText(source.file)},
                       {"last_write_error", optionalText(source.last_write_error)}};
    std::vector<acceptance::FlipEvent> flips = pieces_.roles.flips();
    status["last_flip"] = flips.empty() ? nlohmann::json(nullptr) : flipJson(flips.front());
    status["recent_flips"] = nlohmann::json::array();
    for (const acceptance::FlipEvent& f : flips) status["recent_flips"].push_back(flipJson(f));
    status["budgets"] = pieces_.budgets.statusJson();
    status["top_keys"] = pieces_.budgets.topKeysJson(10);
    status["control"] = pieces_.control.controlJson();
    status["replicas"] = pieces_.control.replicasJson();
    status["acceptance_dir"] = optionalText(pieces_.records.dir());
    status["failover_requires_acceptance"] = actions_.config().routing.failover_requires_acceptance;
    if (std::optional<UnacceptedFailover> failover = backends.unacceptedFailover())
        status["failover_unaccepted"] = {{"backend", failover->backends},
                                         {"at", failover->at},
                                         {"blocked", failover->blocked},
                                         {"message", failover->message}};
    else status["failover_unaccepted"] = nullptr;
    return jsonResponse(200, status);
}

namespace {

// The flip's body: every field optional, each of its type; nothing else.
// The views point into `body`.
std::string readFlipRequest(const nlohmann::json& body, AdminListener::FlipRequest& out) {
    if (!body.is_object()) return "the body must be a JSON object";
    for (const auto& [key, value] : body.items()) {
        if (key == "force") {
            if (!value.is_boolean()) return "'force' must be true or false";
            out.force = value.get<bool>();
            continue;
        }
        if (key != "to" && key != "expect_primary" && key != "by")
            return "unknown field '" + std::string(clipUtf8(key, 64)) + "'";
        if (!value.is_string())
            return "'" + key + "' must be a " + (key == "by" ? "name" : "backend name") + " (a string)";
        std::string_view text = value.get_ref<const std::string&>();
        if (key == "to") out.to = text;
        else if (key == "by") out.by = std::string(clipUtf8(text, 100));
        else out.expect_primary = text;
    }
    return {};
}

}  // namespace

awaitable<http::response<http::string_body>> AdminListener::flip(const FlipRequest& flip_request) {
    const std::string_view target_name = flip_request.to;
    BackendRegistry& backends = pieces_.backends;
    std::optional<size_t> target;
    if (target_name.empty()) {
        for (const BackendView& b : backends.snapshot())
            if (b.role == conf::BackendRole::standby) {
                target = backends.find(b.name);
                break;
            }
    } else {
        target = backends.find(target_name);
    }
    if (!target) {
        ApiError error = ApiError::notFound(target_name.empty() ? "there is no standby to flip to."
                                                                : "no backend named '" +
                                                                      std::string(clipUtf8(target_name, 200)) + "'.");
        co_return errorResponse(error);
    }
    // With the roles in etcd and etcd away, no flip can be written: say so
    // first, not what this replica's last applied roles would refuse.
    if (!pieces_.control.reachable()) co_return *refusedChange(storeAway(pieces_.control), "flip");
    // Identity is proved now, not remembered: a standby that was fine a probe
    // interval ago may have been restarted with another model or window.
    const conf::Config& config = actions_.config();
    const conf::BackendConfig& target_config = backends.config(*target);
    const std::string& who = flip_request.by;
    ProbeResult probe = co_await HealthChecker::probe(target_config, config.model.id, config.health.timeout_ms);
    // The record check: a passing acceptance record of the target whose
    // identity is what the target reports now (a changed build needs a new one).
    std::string record_note;
    std::string record_used;  // the record's file, or its etcd key
    // The live checks first (they say the most), then the record.
    if (std::optional<std::string> refusal =
            backends.flipTo(*target, probe, config.model.window_tokens, flip_request.expect_primary, false)) {
        // Lost to a flip this replica has seen already: say whose.
        if (refusal->starts_with("the primary is") || refusal->ends_with("is already the primary"))
            *refusal += acceptance::flippedBy(pieces_.roles.flips(), backends.primaryName());
        logLine(LogLevel::warn, "admin flip to " + target_config.name + " by " + who + " refused: " + *refusal);
        co_return errorResponse(ApiError::conflict("flip refused: " + *refusal + ".", "flip_refused"));
    }
    if (!flip_request.force) {
        actions_.refreshAcceptance();
        std::string why_not;
        std::optional<acceptance::RecordStore::Found> record = pieces_.records.matching(
            target_config.name, target_config.url, identityOf(config.model.id, probe), why_not);
        if (!record) {
            std::string message = "flip refused: " + target_config.name + " is not accepted: " + why_not +
                                  ". Run `dpgate accept --backend " + target_config.name +
                                  "`, or send \"force\": true to flip without a record.";
            logLine(LogLevel::warn, "admin flip to " + target_config.name + " by " + who + " refused: " + why_not);
            co_return errorResponse(ApiError::conflict(message, "flip_refused"));
        }
        record_note = ", accepted " + record->record.time;
        record_used = record->file;
    }
    if (pieces_.control.shared()) {
        // One etcd transaction against the primary the operator expects (or
        // this replica saw): of two racing flips, one commits.
        const std::string from =
            flip_request.expect_primary ? std::string(*flip_request.expect_primary) : backends.primaryName();
        // Named, not temporaries of the co_await (GCC 12 may destroy those twice).
        acceptance::FlipEvent event{who,        acceptance::utcNow(), from, target_config.name, flip_request.force,
                                    record_used};
        std::string expected = from;
        control::ControlOutcome outcome = co_await pieces_.control.flip(std::move(expected), std::move(event));
        if (auto refused = refusedChange(outcome, "flip")) {
            logLine(LogLevel::warn,
                    "admin flip to " + target_config.name + " by " + who + " refused: " + outcome.message);
            co_return std::move(*refused);
        }
        pieces_.metrics.flips.inc();
        if (flip_request.force) pieces_.metrics.forced_flips.inc();
        actions_.refreshAcceptance();
        logLine(flip_request.force ? LogLevel::warn : LogLevel::info,
                std::string("admin ") + (flip_request.force ? "FORCED " : "") + "flip by " + who +
                    " (etcd): " + target_config.name + " is now the primary (was " + (from.empty() ? "none" : from) +
                    ", window " + std::to_string(probe.max_model_len) + record_note + ")");
        co_return status();
    }
    const std::string from = backends.primaryName();
    std::optional<std::string> refusal =
        backends.flipTo(*target, probe, config.model.window_tokens, flip_request.expect_primary);
    if (refusal) {
        logLine(LogLevel::warn, "admin flip to " + target_config.name + " by " + who + " refused: " + *refusal);
        ApiError error = ApiError::conflict("flip refused: " + *refusal + ".", "flip_refused");
        co_return errorResponse(error);
    }
    pieces_.metrics.flips.inc();
    if (flip_request.force) {
        pieces_.metrics.forced_flips.inc();
        logLine(LogLevel::warn, "admin FORCED flip by " + who + ": " + target_config.name +
                                    " is now the primary without an acceptance-record check");
    }
    pieces_.roles.recordFlip({who, acceptance::utcNow(), from, target_config.name, flip_request.force, record_used},
                             backends);
    actions_.refreshAcceptance();
    logLine(LogLevel::info, "admin flip by " + who + ": " + target_config.name + " is now the primary (was " +
                                (from.empty() ? "none" : from) + ", window " + std::to_string(probe.max_model_len) +
                                record_note + ")");
    co_return status();
}

http::response<http::string_body> AdminListener::metricsPage() const {
    http::response<http::string_body> response{http::status::ok, 11};
    response.set(http::field::content_type, metrics::kTextContentType);
    response.body() = gatewayMetricsPage(pieces_.metrics, pieces_.backends, readings_, pieces_.admission_pool);
    return response;
}

awaitable<http::response<http::string_body>> AdminListener::backendMetrics(std::string_view name) {
    BackendRegistry& backends = pieces_.backends;
    std::optional<size_t> index = backends.find(name);
    if (!index) {
        ApiError error = ApiError::notFound("no backend named '" + std::string(clipUtf8(name, 200)) + "'.");
        co_return errorResponse(error);
    }
    HealthChecker::Fetched fetched =
        co_await HealthChecker::fetch(backends.config(*index), "/metrics", actions_.config().health.timeout_ms * 5);
    if (fetched.status == 0) {
        ApiError error =
            ApiError::badGateway("backend '" + std::string(name) + "': " + fetched.error + ".", "backend_unreachable");
        co_return errorResponse(error);
    }
    // Verbatim: status, content type and body as the backend sent them.
    http::response<http::string_body> response{static_cast<http::status>(fetched.status), 11};
    if (!fetched.content_type.empty()) response.set(http::field::content_type, fetched.content_type);
    response.body() = std::move(fetched.body);
    co_return response;
}

awaitable<http::response<http::string_body>> AdminListener::drain(std::string_view name, bool drained) {
    BackendRegistry& backends = pieces_.backends;
    std::optional<size_t> index = backends.find(name);
    if (!index) {
        ApiError error = ApiError::notFound("no backend named '" + std::string(clipUtf8(name, 200)) + "'.");
        co_return errorResponse(error);
    }
    if (pieces_.control.shared()) {
        if (!pieces_.control.reachable())
            co_return *refusedChange(storeAway(pieces_.control), drained ? "drain" : "undrain");
        const std::string backend(name);
        control::ControlOutcome outcome = co_await pieces_.control.drain(backend, drained);
        if (auto refused = refusedChange(outcome, drained ? "drain" : "undrain")) co_return std::move(*refused);
        logLine(LogLevel::info, std::string("admin ") + (drained ? "drain " : "undrain ") + backend + " (etcd)");
        co_return status();
    }
    backends.setDrained(*index, drained);
    pieces_.roles.persist(backends);
    logLine(LogLevel::info, std::string("admin ") + (drained ? "drain " : "undrain ") + std::string(name));
    co_return status();
}

awaitable<http::response<http::string_body>> AdminListener::answer(const http::request<http::string_body>& request,
                                                                   const std::string& peer) {
    // Two tokens: which one counts is ambiguous (a proxy in front may have
    // checked the other), so neither does.
    if (request.count(http::field::authorization) > 1) {
        ApiError error =
            ApiError::badRequest("more than one Authorization header field; send it once.", "duplicate_header");
        co_return errorResponse(error);
    }
    // Every admin endpoint needs the admin token; client keys do not open it.
    // Except two that hold nothing (admin_page.hpp says why): the status
    // page's shell and /health for a liveness probe.
    if (std::optional<http::response<http::string_body>> open = answerWithoutToken(request)) co_return std::move(*open);
    const LocalRef<const auth::KeyStore> keys = actions_.keys();
    if (!keys->authenticateAdmin(request[http::field::authorization])) {
        ApiError error =
            ApiError::unauthorized(keys->hasAdminToken() ? "the admin API needs 'Authorization: Bearer <admin token>'."
                                                         : "the admin API is closed: no admin.token is configured.");
        error.code = "invalid_admin_token";
        http::response<http::string_body> response = errorResponse(error);
        response.set(http::field::www_authenticate, "Bearer");
        co_return response;
    }
    std::string_view target = request.target();
    std::string_view path = target.substr(0, target.find('?'));
    std::string_view query = target.size() > path.size() ? target.substr(path.size() + 1) : std::string_view();
    // HEAD is GET without the body (serve() writes only the head).
    const bool get = request.method() == http::verb::get || request.method() == http::verb::head;
    const bool post = request.method() == http::verb::post;
    if (get && path == "/admin/status") {
        // A record `dpgate accept` has just written shows at once (refresh
        // rereads only new and changed files).
        actions_.refreshAcceptance();
        co_await refreshRankTables();
        co_return status();
    }
    if (get && path == "/admin/usage") {
        nlohmann::json usage = co_await pieces_.budgets.usageJson();
        co_return jsonResponse(200, usage);
    }
    if (get && path == "/metrics") {
        if (!actions_.config().metrics.enabled) {
            ApiError error = ApiError::notFound("metrics are off (metrics.enabled: false).", "metrics_disabled");
            co_return errorResponse(error);
        }
        co_return metricsPage();
    }
    if (post && path == "/admin/reload") {
        // ?allow_no_keys=true: the operator knows the new config locks every client out.
        const bool allow_no_keys = query == "allow_no_keys=true";
        if (std::optional<std::string> refused = actions_.reload({.allow_no_keys = allow_no_keys})) {
            ApiError error = ApiError::badRequest(*refused, "reload_refused");
            co_return errorResponse(error);
        }
        co_return jsonResponse(200, {{"reloaded", actions_.config().source_path}});
    }
    if (get && path.starts_with("/backends/") && path.ends_with("/metrics")) {
        std::string_view name = path.substr(10, path.size() - 10 - 8);
        co_return co_await backendMetrics(name);
    }
    if (post && path == "/admin/flip") {
        // {"expect_primary": "A", "to": "B"} in the body; ?to=B still works.
        FlipRequest flip_request;
        flip_request.to = query.starts_with("to=") ? query.substr(3) : std::string_view();
        nlohmann::json body;
        if (!request.body().empty()) {
            body = nlohmann::json::parse(request.body(), nullptr, false);
            std::string shape_error = readFlipRequest(body, flip_request);
            if (!shape_error.empty()) {
                ApiError error = ApiError::badRequest("flip: " + shape_error, "invalid_flip_request");
                co_return errorResponse(error);
            }
        }
        if (flip_request.by.empty()) flip_request.by = "admin@" + peer;
        co_return co_await flip(flip_request);
    }
    for (auto [prefix, drained] :
         {std::pair{std::string_view("/admin/drain/"), true}, std::pair{std::string_view("/admin/undrain/"), false}})
        if (post && path.starts_with(prefix)) co_return co_await drain(path.substr(prefix.size()), drained);
    ApiError error = ApiError::notFound("no admin route for " + std::string(clipUtf8(request.method_string(), 32)) +
                                        " " + std::string(clipUtf8(path, 200)) + ".");
    co_return errorResponse(error);
}

}  // namespace dpgate::gateway
