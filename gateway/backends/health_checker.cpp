#include "gateway/backends/health_checker.hpp"

#include "gateway/platform/log.hpp"

#include <boost/asio/this_coro.hpp>
#include <nlohmann/json.hpp>

namespace dpgate::gateway {
namespace {

awaitable<std::pair<error_code, http::response<http::string_body>>> exchange(
    beast::tcp_stream& stream, beast::flat_buffer& buffer, const conf::BackendConfig& backend, http::verb method,
    const std::string& target, const std::string& body, const std::vector<std::pair<std::string, std::string>>& headers,
    size_t body_limit) {
    http::request<http::string_body> request{method, target, 11};
    request.set(http::field::host, backend.host + ":" + std::to_string(backend.port));
    request.set(http::field::user_agent, "dpgate-health");
    for (const auto& [name, value] : headers) request.set(name, value);
    if (method != http::verb::get) {
        request.set(http::field::content_type, "application/json");
        request.body() = body;
        request.prepare_payload();
    }
    request.keep_alive(true);
    http::response<http::string_body> response;
    auto [wec, wn] = co_await http::async_write(stream, request, use_nothrow);
    if (wec) co_return std::pair{wec, std::move(response)};
    http::response_parser<http::string_body> parser;
    parser.body_limit(body_limit);
    auto [rec, rn] = co_await http::async_read(stream, buffer, parser, use_nothrow);
    co_return std::pair{rec, parser.release()};
}

awaitable<std::pair<error_code, http::response<http::string_body>>> get(beast::tcp_stream& stream,
                                                                        beast::flat_buffer& buffer,
                                                                        const conf::BackendConfig& backend,
                                                                        const char* target) {
    co_return co_await exchange(stream, buffer, backend, http::verb::get, target, {}, {}, 4 * 1024 * 1024);
}

// A fresh connection to the backend; the error text when it cannot be made.
awaitable<std::string> connectTo(beast::tcp_stream& stream, const conf::BackendConfig& backend) {
    tcp::resolver resolver(stream.get_executor());
    const std::string service = std::to_string(backend.port);
    auto [dec, endpoints] = co_await resolver.async_resolve(backend.host, service, use_nothrow);
    if (dec) co_return "cannot resolve " + backend.host + ": " + dec.message();
    auto [cec, endpoint] = co_await stream.async_connect(endpoints, use_nothrow);
    if (cec) co_return "connect: " + cec.message();
    co_return std::string();
}

}  // namespace

HealthChecker::HealthChecker(net::io_context& io, ConfigInForce config_in_force, BackendRegistry& registry)
    : io_(io), config_in_force_(std::move(config_in_force)), registry_(registry) {}

void HealthChecker::start() {
    for (size_t i = 0; i < registry_.size(); ++i) {
        timers_.push_back(std::make_unique<net::steady_timer>(io_));
        net::co_spawn(io_, loop(i), net::detached);
    }
}

void HealthChecker::stop() {
    stopped_ = true;
    for (auto& t : timers_) t->cancel();
}

awaitable<ProbeResult> HealthChecker::probe(const conf::BackendConfig& backend, const std::string& model_id,
                                            uint64_t timeout_ms) {
    ProbeResult result;
    auto executor = co_await net::this_coro::executor;
    beast::tcp_stream stream(executor);
    beast::flat_buffer buffer;
    stream.expires_after(ms(timeout_ms));
    result.error = co_await connectTo(stream, backend);
    if (!result.error.empty()) co_return result;
    result.reached = true;
    auto [hec, health] = co_await get(stream, buffer, backend, "/health");
    if (hec) {
        result.error = "GET /health: " + hec.message();
        co_return result;
    }
    result.health_ok = health.result_int() == 200;
    if (!result.health_ok) result.error = "GET /health answered " + std::to_string(health.result_int());
    if (!health.keep_alive()) co_return result;

    auto [mec, models] = co_await get(stream, buffer, backend, "/v1/models");
    if (mec || models.result_int() != 200) {
        result.error =
            mec ? "GET /v1/models: " + mec.message() : "GET /v1/models answered " + std::to_string(models.result_int());
        co_return result;
    }
    auto list = nlohmann::json::parse(models.body(), nullptr, /*allow_exceptions=*/false);
    if (!list.is_object() || !list.contains("data") || !list["data"].is_array()) {
        result.error = "GET /v1/models: not a model list";
        co_return result;
    }
    result.models_ok = true;
    result.server = std::string(models[http::field::server]);
    for (const auto& m : list["data"]) {
        if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
        std::string id = m["id"].get<std::string>();
        if (id == model_id && m.contains("max_model_len") && m["max_model_len"].is_number_unsigned())
            result.max_model_len = m["max_model_len"].get<uint64_t>();
        result.model_ids.push_back(std::move(id));
    }
    // What the backend says of its build (vLLM: {"version": "0.9.1"}); part
    // of the identity acceptance records are matched against.
    if (!models.keep_alive()) co_return result;
    auto [vec, version] = co_await get(stream, buffer, backend, "/version");
    if (!vec && version.result_int() == 200) {
        auto doc = nlohmann::json::parse(version.body(), nullptr, /*allow_exceptions=*/false);
        if (doc.is_object() && doc.contains("version") && doc["version"].is_string())
            result.version = doc["version"].get<std::string>().substr(0, 200);
    }
    co_return result;
}

awaitable<HealthChecker::Fetched> HealthChecker::fetch(const conf::BackendConfig& backend, const char* target,
                                                       uint64_t timeout_ms) {
    Fetched fetched;
    auto executor = co_await net::this_coro::executor;
    beast::tcp_stream stream(executor);
    beast::flat_buffer buffer;
    stream.expires_after(ms(timeout_ms));
    fetched.error = co_await connectTo(stream, backend);
    if (!fetched.error.empty()) co_return fetched;
    auto [ec, response] = co_await get(stream, buffer, backend, target);
    if (ec) {
        fetched.error = std::string("GET ") + target + ": " + ec.message();
        co_return fetched;
    }
    fetched.status = response.result_int();
    fetched.content_type = std::string(response[http::field::content_type]);
    fetched.server = std::string(response[http::field::server]);
    fetched.body = std::move(response.body());
    co_return fetched;
}

awaitable<HealthChecker::Fetched> HealthChecker::call(const conf::BackendConfig& backend, const Call& call) {
    Fetched fetched;
    auto executor = co_await net::this_coro::executor;
    beast::tcp_stream stream(executor);
    beast::flat_buffer buffer;
    stream.expires_after(ms(call.timeout_ms));
    fetched.error = co_await connectTo(stream, backend);
    if (!fetched.error.empty()) co_return fetched;
    auto [ec, response] =
        co_await exchange(stream, buffer, backend, call.method, call.target, call.body, call.headers, call.body_limit);
    if (ec) {
        fetched.error = std::string(http::to_string(call.method)) + " " + call.target + ": " + ec.message();
        co_return fetched;
    }
    fetched.status = response.result_int();
    fetched.content_type = std::string(response[http::field::content_type]);
    fetched.server = std::string(response[http::field::server]);
    fetched.body = std::move(response.body());
    co_return fetched;
}

awaitable<void> HealthChecker::loop(size_t index) {
    const conf::BackendConfig& backend = registry_.config(index);
    // The log follows the probes' verdict, not routability: draining a
    // backend does not make it "down", and an unknown one is not down either.
    BackendHealth was = BackendHealth::unknown;
    bool told_unreached = false;
    while (!stopped_) {
        const conf::Config& config = config_in_force_();
        ProbeResult result = co_await probe(backend, config.model.id, config.health.timeout_ms);
        if (stopped_) break;
        registry_.recordProbe(index, result);
        const BackendHealth now = registry_.health(index);
        const std::string why = result.error.empty() ? "" : " (" + result.error + ")";
        if (now != was) {
            logLine(now == BackendHealth::healthy ? LogLevel::info : LogLevel::warn,
                    "backend " + backend.name + " is " + (now == BackendHealth::healthy ? "up" : "down") + why +
                        (result.max_model_len ? ", window " + std::to_string(result.max_model_len) : ""));
        } else if (now == BackendHealth::unknown && !told_unreached) {
            // Not an alarm: at start-up a backend may come up after the gateway.
            logLine(LogLevel::info, "backend " + backend.name + " is not reachable yet" + why + "; down after " +
                                        std::to_string(config.health.fall) + " probes like this");
            told_unreached = true;
        }
        was = now;
        timers_[index]->expires_after(ms(config_in_force_().health.interval_ms));
        co_await timers_[index]->async_wait(use_nothrow);
    }
}

}  // namespace dpgate::gateway
