#include "gateway/path/request_path.hpp"

#include "gateway/backends/backend_registry.hpp"
#include "gateway/backends/router.hpp"
#include "gateway/http/http_grammar.hpp"
#include "gateway/path/accounting.hpp"
#include "gateway/path/admit_request.hpp"
#include "gateway/path/answer.hpp"
#include "gateway/path/body_pump.hpp"
#include "gateway/path/budget_gate.hpp"
#include "gateway/path/caller.hpp"
#include "gateway/path/client_connection.hpp"
#include "gateway/path/client_watch.hpp"
#include "gateway/path/local_endpoints.hpp"
#include "gateway/path/metrics_tunnel.hpp"
#include "gateway/path/path_parts.hpp"
#include "gateway/path/retry.hpp"
#include "gateway/path/upstream_exchange.hpp"
#include "gateway/platform/log.hpp"
#include "routing/affinity_key.hpp"

#include <boost/beast/core/string.hpp>

#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace dpgate::gateway {

namespace {

// How much of a request's own text an error message quotes.
constexpr size_t kQuotedBytes = 200;

// Every turn of a conversation goes to the slot holding its prefix.
uint64_t affinityOf(const RequestContext& c, const admission::Admitted& admitted) {
    std::string_view session_key = c.request[c.config.routing.session_header];
    return routing::affinityKey(session_key.empty() ? std::nullopt : std::optional<std::string_view>(session_key),
                                admitted.has_prompt_cache_key
                                    ? std::optional<std::string_view>(admitted.prompt_cache_key)
                                    : std::nullopt,
                                admitted.head_hash)
        .key;
}

// Operators' smoke tests pin a rank ("X-data-parallel-rank: 0"); only a
// trusted key may (the Router checks the backend has that rank).
std::optional<uint32_t> pinnedRank(const RequestContext& c) {
    if (!c.key || !c.key->trusted) return std::nullopt;
    std::string_view pin = c.request[beast::string_view("X-data-parallel-rank")];
    uint32_t rank = 0;
    auto [end, ec] = std::from_chars(pin.data(), pin.data() + pin.size(), rank);
    if (pin.empty() || ec != std::errc() || end != pin.data() + pin.size()) return std::nullopt;
    return rank;
}

// Watching the client costs a coroutine and an epoll re-arm per request;
// it pays where a hang-up would otherwise leave the backend working for
// long: streams, and prompts whose prefill takes noticeable time.
bool worthWatching(const admission::Admitted& admitted) {
    constexpr uint64_t kWatchPromptTokens = 4096;
    return admitted.stream || admitted.prompt_tokens >= kWatchPromptTokens;
}

RetryObserver logRetry(RequestContext& c) {
    return [&c](const SlotLease& failed, const std::string& why, const SlotLease& next) {
        ++c.record.retries;
        logLine(LogLevel::warn, "request " + c.record.request_id + ": backend " + failed.backendName() + " rank " +
                                    std::to_string(failed.rank()) + " " + why + "; retrying on " + next.backendName() +
                                    " rank " + std::to_string(next.rank()));
    };
}

awaitable<bool> answerLocally(RequestContext& c, std::string_view path) {
    if (path == "/metrics") co_return co_await answerMetrics(c);
    // HEAD is GET without the body (the session writes only the head).
    const bool is_get = c.request.method() == http::verb::get || c.request.method() == http::verb::head;
    if (path == "/health" || path == "/v1/models") {
        if (!is_get) {
            ApiError error = ApiError::methodNotAllowed("use GET for " + std::string(path) + ".");
            co_return co_await refuse(c, error, c.keep_alive);
        }
        http::response<http::string_body> response{http::status::ok, 11};
        response.set(http::field::content_type, "application/json");
        response.set("X-Request-ID", c.record.request_id);
        response.keep_alive(c.keep_alive);
        if (path == "/health") {
            auto [status, body] = healthBody(c.shared.backends);
            response.result(status);
            response.body() = std::move(body);
        } else {
            response.body() = modelsBody(c.config.model, c.shared.backends.publicWindow());
        }
        AnswerOutcome outcome;
        const bool written = co_await writeAnswer(c, response, outcome);
        co_return written&& c.keep_alive;
    }
    ApiError error =
        ApiError::notFound("no route for " + std::string(clipUtf8(c.request.method_string(), 32)) + " " +
                           std::string(clipUtf8(path, kQuotedBytes)) +
                           "; dpgate serves /v1/chat/completions, /v1/completions, /v1/models, /health and "
                           "/metrics (for a key with metrics: true).");
    co_return co_await refuse(c, error, c.keep_alive);
}

// Tests prove the session's last line of defence (any exception becomes a
// 500, a log line, a metric and an access record) with a request that
// throws: only in a process started with DPGATE_TEST_FAULTS=1.
bool testFaultsEnabled() {
    static const bool enabled = [] {
        const char* value = std::getenv("DPGATE_TEST_FAULTS");
        return value != nullptr && std::string_view(value) == "1";
    }();
    return enabled;
}

// A field dpgate acts on, sent twice: which one counts is ambiguous (a
// proxy in front may have checked the other), so neither does. The name as
// the client spelled it, or empty when each comes at most once. One pass,
// by the ids the parser gave the fields; names only for the few it could
// not name, and the configured session header's by its length and first
// letter before a compare (OR 0x20 folds a letter's case).
std::string_view repeatedField(const RequestContext& c) {
    const HeadFields& fields = c.request.fields();
    const std::string_view session_header = c.config.routing.session_header;
    unsigned seen = 0;
    for (size_t i = 0; i < fields.size(); ++i) {
        const HeadFields::Field& f = fields.at(i);
        const std::string_view name = fields.nameOf(f);
        unsigned bit = 0;
        if (f.name == http::field::authorization) bit = 1;
        else if (f.name == http::field::expect) bit = 2;
        else if (name.size() == session_header.size() && (name[0] | 0x20) == (session_header[0] | 0x20) &&
                 grammar::iequals(name, session_header))
            bit = 4;
        else if (f.name != http::field::unknown) continue;
        else if (grammar::isName(name, "x-request-id")) bit = 8;
        else if (grammar::isName(name, "x-data-parallel-rank")) bit = 16;
        else continue;
        if (seen & bit) return name;
        seen |= bit;
    }
    return {};
}

// A refusal before admission, written from a frame of its own (the error
// is moved in: serveRequest is not a coroutine and keeps nothing).
awaitable<bool> refuseHead(RequestContext& c, ApiError error, http::field extra, std::string extra_value) {
    co_return co_await refuse(c, error, c.keep_alive, extra, extra_value);
}

awaitable<bool> refuseNoBackend(RequestContext& c) {
    ApiError error =
        ApiError::unavailable("no backend is available: every backend is down or drained.", "backend_unavailable");
    co_return co_await refuse(c, error, c.keep_alive);
}

// The body refused while it was read (400 framing, 413, 503 beyond the
// buffered-body budget): the connection closes after the answer.
awaitable<bool> refuseBody(RequestContext& c, const ClientConnection::BodyRead& read) {
    const http::field extra = read.retry_after.empty() ? http::field::unknown : http::field::retry_after;
    co_await refuse(c, *read.refusal, false, extra, read.retry_after);
    co_return false;
}

awaitable<bool> proxyLargeRequest(RequestContext& c);

// Steps 4 to 7 for a caller that may: the one coroutine frame a proxied
// request's own path costs. It stays small (memory held per request in
// flight, tests/bench/proxy/frame_sizes.py): the refusals and the failures
// are written by coroutines of their own.
awaitable<bool> proxyRequest(RequestContext& c) {
    RequestOutcome outcome(c);

    // 4. Admit: what cannot succeed is refused here (a large body was
    // judged off this thread already: proxyLargeRequest).
    std::optional<admission::Verdict> quick = c.judged ? std::nullopt : admitRequest(c);
    // Too much work for this thread after all: judged in the pool.
    if (!c.judged && !quick) co_return co_await proxyLargeRequest(c);
    admission::Verdict& verdict = c.judged ? *c.judged : *quick;
    if (auto* refused = std::get_if<admission::Refused>(&verdict)) co_return co_await refuse(c, *refused, c.keep_alive);
    const admission::Admitted& admitted = std::get<admission::Admitted>(verdict);

    // 4b. Charge the key: the request's exact tokens against its budgets
    // (and, for every key, into its usage).
    if (c.budget_key) {
        budget::Decision decision;
        if (!reserveBudgetNow(c, admitted, decision)) co_await reserveBudgetShared(c, admitted, decision);
        if (decision.verdict != budget::Verdict::allowed)
            co_return co_await refuseBudget(c, decision, reservedTokens(admitted));
    }

    // 5. Plan the route: the conversation's slot first, then where it goes
    // when that slot is overloaded or fails.
    Router& router = c.shared.router;
    const RoutePlan plan = router.plan(affinityOf(c, admitted), double(admitted.prompt_tokens));
    if (plan.empty()) co_return co_await refuseNoBackend(c);

    // 6. Forward with retry: one upstream exchange, its answer pumped to the
    // client. Tokens of every stream are counted: a client that did not ask
    // for the usage chunk gets the stream without it.
    // A budgeted key's stream is settled from its usage, so it is asked for
    // whatever metrics.stream_usage says.
    const bool stream_usage_added =
        admitted.stream && !admitted.has_stream_options && (c.config.metrics.stream_usage || c.ticket.budgeted);
    ClientWatch watch;
    if (worthWatching(admitted)) watch.start(c.local.io(), c.connection);
    UpstreamExchange exchange({.request = c.request,
                               .admitted = admitted,
                               .request_id = c.record.request_id,
                               .peer = c.connection.peerAddress(),
                               .stream_usage_added = stream_usage_added},
                              c.config.limits, c.shared.backends, c.local, c.metrics, watch);
    const std::optional<uint32_t> pin = pinnedRank(c);
    const RetryObserver on_retry = logRetry(c);
    Forwarded forwarded = co_await forwardWithRetry(router, plan, pin, exchange, on_retry);
    switch (forwarded.answer.kind) {
        case UpstreamAnswer::Kind::client_gone: co_return false;
        case UpstreamAnswer::Kind::failed:
        case UpstreamAnswer::Kind::timed_out: co_return co_await answerNoAnswer(c, forwarded.lease, forwarded.answer);
        case UpstreamAnswer::Kind::answered: break;
    }
    const bool keep_alive =
        co_await pumpAnswer(c, exchange, forwarded.lease, watch, stream_usage_added, admitted.sequences);

    // 7. Account.
    accountAnswer(c, forwarded.lease, admitted);
    co_return keep_alive;
}

// A body of limits.offload_admission_bytes or more is judged on the worker's
// admission thread first, while this thread serves the worker's other
// requests; then proxied as any other. A frame of its own keeps the
// co_await out of proxyRequest's, which stays under Asio's recycling limit
// (and so does the verdict, handed over in the context, not as a parameter).
awaitable<bool> proxyLargeRequest(RequestContext& c) {
    admission::Verdict verdict;
    co_await admitOffThread(c, verdict);
    c.judged = &verdict;
    co_return co_await proxyRequest(c);
}

// A body that did not come whole with its head is read in a frame of its
// own, as it arrives; a small request's comes with its head and its path
// keeps one frame.
awaitable<bool> readBodyThenProxy(RequestContext& c) {
    // Awaited in a statement of its own: GCC 12 miscompiles `if (!co_await ...)` here.
    const ClientConnection::BodyRead read = co_await c.connection.readBody(c.config.limits);
    if (read.refusal) co_return co_await refuseBody(c, read);
    if (!read.complete) {
        if (read.gone) c.record.rejection = read.gone;
        co_return false;  // the client is gone
    }
    if (admitsOffThread(c)) co_return co_await proxyLargeRequest(c);
    co_return co_await proxyRequest(c);
}

}  // namespace

awaitable<bool> serveRequest(RequestContext& c) {
    std::string_view target = c.request.target();
    std::string_view path = target.substr(0, target.find('?'));
    if (testFaultsEnabled() && c.request[beast::string_view("X-Dpgate-Test-Fault")] == "throw")
        throw std::runtime_error("test fault: X-Dpgate-Test-Fault: throw");

    // The head's own sense: each field dpgate acts on at most once.
    if (const std::string_view repeated = repeatedField(c); !repeated.empty())
        return refuseHead(c,
                          ApiError::badRequest("more than one " + std::string(clipUtf8(repeated, kQuotedBytes)) +
                                                   " header field; send it once.",
                                               "duplicate_header"),
                          http::field::unknown, {});

    // 1. Who is calling. The OpenAI API needs a key; /health answers monitors without one.
    if (path.starts_with("/v1/")) {
        Authentication who = authenticate(*c.shared.keys.local(), c.request[http::field::authorization]);
        if (who.refusal) return refuseHead(c, std::move(*who.refusal), http::field::www_authenticate, "Bearer");
        c.key = std::move(who.key);
        if (c.key) {
            c.record.key_name = c.key->name;
            c.record.key_hash = c.key->hash_prefix;
        }
    }
    if (path != "/v1/chat/completions" && path != "/v1/completions") return answerLocally(c, path);
    if (c.request.method() != http::verb::post)
        return refuseHead(c, ApiError::methodNotAllowed("use POST for " + std::string(path) + "."),
                          http::field::unknown, {});

    // 2. How much they may: a slot of the key's limits, held until the answer is out.
    KeyLeaseResult leased = leaseKey(c.shared.key_limiter.local(), c.key);
    if (leased.refusal) {
        if (c.metrics) c.metrics->key_rate_limited.with({c.key->name, "max_concurrent"}).inc();
        return refuseHead(c, std::move(*leased.refusal), http::field::retry_after,
                          std::to_string(leased.retry_after_seconds));
    }
    c.key_lease = std::move(leased.lease);
    // A key out of requests (per minute or day) is refused before its body is read.
    if (budget::Decision head; !budgetAllowsHead(c, head)) return refuseBudget(c, head, 0);

    // 3. The body, only now that the head has earned it, held against the
    // process's budget (503 beyond it). What came with the head is taken at
    // once; the rest is read as it arrives.
    if (!c.connection.takeBody()) return readBodyThenProxy(c);
    if (admitsOffThread(c)) return proxyLargeRequest(c);
    return proxyRequest(c);
}

}  // namespace dpgate::gateway
