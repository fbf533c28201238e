// GET /metrics on the client port, for operators who reach dpgate only
// through the users' tunnel: the backends' own vLLM series, each sample
// labelled backend="<name>" (metrics/merge_backend_pages.hpp), then
// dpgate's own page, the admin port's /metrics (gateway_metrics_page.hpp).
//
// Only a key with `metrics: true` may read it, whatever auth.required says:
// no key or a wrong one is a 401, a key without it a 403; metrics.enabled:
// false makes it a 404, as on the admin port. The key's limits apply as to
// any request (a scraper's max_concurrent: 1 keeps scrapes from piling up
// on the backends).
//
// Every configured backend's /metrics is fetched at once, each on a fresh
// connection within health.timeout_ms x 5 (as the admin port's
// /backends/{name}/metrics), on the worker serving the request. A backend
// that does not answer 200 in time adds no series, only
// dpgate_backend_metrics_up{backend} 0.
#pragma once

#include "gateway/net/net.hpp"
#include "gateway/path/request_context.hpp"

namespace dpgate::gateway {

// Returns whether the client connection may serve another request.
awaitable<bool> answerMetrics(RequestContext& c);

}  // namespace dpgate::gateway
