#include "gateway/path/retry.hpp"

namespace dpgate::gateway {

namespace {

bool overloaded(unsigned status) { return status == 502 || status == 503 || status == 504; }

}  // namespace

awaitable<Forwarded> forwardWithRetry(Router& router, const RoutePlan& first, std::optional<uint32_t> pinned_rank,
                                      UpstreamConnector& upstream, const RetryObserver& on_retry) {
    constexpr int kTries = 2;
    const RoutePlan* plan = &first;  // the first plan is not copied: a retry is rare
    RoutePlan replanned;
    Forwarded out;
    out.lease = router.lease(*plan, 0, pinned_rank);
    for (int attempt = 1;; ++attempt) {
        out.answer = co_await upstream.send(out.lease);
        using Kind = UpstreamAnswer::Kind;
        const bool backend_failed = out.answer.kind == Kind::failed;
        const bool busy = out.answer.kind == Kind::answered && overloaded(out.answer.status);
        if (!backend_failed && !busy) co_return out;
        const std::string why = backend_failed ? out.answer.error : "answered " + std::to_string(out.answer.status);
        router.recordFailure(out.lease, why);
        // The last answer, even a 5xx, goes to the client as it is.
        if (attempt == kTries) co_return out;
        RoutePlan next = router.replan(*plan, out.lease);
        if (next.empty()) co_return out;
        SlotLease failed = std::move(out.lease);
        failed.abandon();
        replanned = std::move(next);
        plan = &replanned;
        out.lease = router.lease(*plan, 0);
        ++out.retries;
        if (on_retry) on_retry(failed, why, out.lease);
    }
}

}  // namespace dpgate::gateway
