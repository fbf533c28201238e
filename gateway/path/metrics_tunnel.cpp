#include "gateway/path/metrics_tunnel.hpp"

#include "gateway/backends/health_checker.hpp"
#include "gateway/metrics/merge_backend_pages.hpp"
#include "gateway/metrics/registry.hpp"
#include "gateway/path/answer.hpp"
#include "gateway/path/caller.hpp"
#include "gateway/path/gateway_metrics_page.hpp"
#include "gateway/path/path_parts.hpp"

#include <boost/asio/this_coro.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace dpgate::gateway {

namespace {

// The admin port's proxied /backends/{name}/metrics waits as long: a vLLM
// page of 8 engines is rendered in well under that, and Prometheus's
// default scrape timeout (10 s) leaves room for the rest.
constexpr uint64_t kFetchTimeoutFactor = 5;

// Who may read the page, from the head alone; the refusal otherwise. Sets
// the caller's key and its slot of the key's limits.
std::optional<ApiError> metricsRefusal(RequestContext& c, uint32_t& retry_after_seconds) {
    Authentication who = authenticateAlways(*c.shared.keys.local(), c.request[http::field::authorization]);
    if (who.refusal) return std::move(who.refusal);
    c.key = std::move(who.key);
    c.record.key_name = c.key->name;
    c.record.key_hash = c.key->hash_prefix;
    if (!c.key->metrics)
        return ApiError::forbidden("key '" + c.key->name +
                                       "' may not read /metrics: give it 'metrics: true' in the keys file "
                                       "(dpgate keys add NAME --metrics).",
                                   "metrics_not_allowed");
    if (!c.config.metrics.enabled)
        return ApiError::notFound("metrics are off (metrics.enabled: false).", "metrics_disabled");
    const bool is_get = c.request.method() == http::verb::get || c.request.method() == http::verb::head;
    if (!is_get) return ApiError::methodNotAllowed("use GET for /metrics.");
    KeyLeaseResult leased = leaseKey(c.shared.key_limiter.local(), c.key);
    if (leased.refusal) {
        retry_after_seconds = leased.retry_after_seconds;
        return std::move(leased.refusal);
    }
    c.key_lease = std::move(leased.lease);
    return std::nullopt;
}

awaitable<bool> refuseMetrics(RequestContext& c, ApiError error, uint32_t retry_after_seconds) {
    http::field extra = http::field::unknown;
    std::string extra_value;
    if (error.http_status == 401) {
        extra = http::field::www_authenticate;
        extra_value = "Bearer";
    } else if (error.http_status == 429) {
        extra = http::field::retry_after;
        extra_value = std::to_string(retry_after_seconds);
    }
    co_return co_await refuse(c, error, c.keep_alive, extra, extra_value);
}

// The pages as they come back; `remaining` counts the fetches still out,
// and the last to land cancels `landed`, which the request waits on. All on
// the worker's one thread: nothing here is shared with another.
struct Fetches {
    Fetches(const Executor& executor, size_t backends) : landed(executor), pages(backends), remaining(backends) {}

    net::steady_timer landed;
    std::vector<HealthChecker::Fetched> pages;
    size_t remaining;
};

awaitable<void> fetchOne(std::shared_ptr<Fetches> fetches, const conf::BackendConfig& backend, uint64_t timeout_ms,
                         size_t index) {
    HealthChecker::Fetched fetched = co_await HealthChecker::fetch(backend, "/metrics", timeout_ms);
    fetches->pages[index] = std::move(fetched);
}

// HealthChecker::fetch opens its own connection on the calling coroutine's
// executor (this worker's io_context), bounded by its timeout; nothing of
// it is tied to the health checker's thread. The config's backends stay
// alive: every config loaded does.
awaitable<std::vector<HealthChecker::Fetched>> fetchBackendPages(const conf::Config& config) {
    const Executor executor = co_await net::this_coro::executor;
    const auto fetches = std::make_shared<Fetches>(executor, config.backends.size());
    const uint64_t timeout_ms = config.health.timeout_ms * kFetchTimeoutFactor;
    for (size_t i = 0; i < config.backends.size(); ++i) {
        auto landed = [fetches](std::exception_ptr) {
            // A fetch that threw left its page empty: status 0, no series.
            if (--fetches->remaining == 0) fetches->landed.cancel();
        };
        net::co_spawn(executor, fetchOne(fetches, config.backends[i], timeout_ms, i), std::move(landed));
    }
    fetches->landed.expires_at(net::steady_timer::time_point::max());
    // Checked with no suspension before the wait: a cancel can only come
    // while it is pending.
    if (fetches->remaining > 0) co_await fetches->landed.async_wait(use_nothrow);
    co_return std::move(fetches->pages);
}

http::response<http::string_body> metricsResponse(RequestContext& c,
                                                  const std::vector<HealthChecker::Fetched>& fetched) {
    std::vector<metrics::BackendPage> pages;
    pages.reserve(fetched.size());
    for (size_t i = 0; i < fetched.size(); ++i) {
        metrics::BackendPage page{c.config.backends[i].name, std::nullopt};
        if (fetched[i].status == 200) page.text = fetched[i].body;
        pages.push_back(page);
    }
    metrics::MergedPages merged = metrics::mergeBackendPages(pages);
    merged.text += gatewayMetricsPage(c.shared.metrics, c.shared.backends, c.shared.readings, c.shared.admission_pool);
    http::response<http::string_body> response{http::status::ok, 11};
    response.set(http::field::content_type, metrics::kTextContentType);
    response.set("X-Request-ID", c.record.request_id);
    response.keep_alive(c.keep_alive);
    response.body() = std::move(merged.text);
    return response;
}

awaitable<bool> serveMetrics(RequestContext& c) {
    const std::vector<HealthChecker::Fetched> fetched = co_await fetchBackendPages(c.config);
    http::response<http::string_body> response = metricsResponse(c, fetched);
    AnswerOutcome outcome;
    const bool written = co_await writeAnswer(c, response, outcome);
    co_return written&& c.keep_alive;
}

}  // namespace

awaitable<bool> answerMetrics(RequestContext& c) {
    uint32_t retry_after_seconds = 0;
    std::optional<ApiError> refusal = metricsRefusal(c, retry_after_seconds);
    if (refusal) return refuseMetrics(c, std::move(*refusal), retry_after_seconds);
    return serveMetrics(c);
}

}  // namespace dpgate::gateway
