// What one request carries through its stages (request_path.hpp): its
// connection, the config it is served under, who is calling, what it holds,
// and the two parts of the process it may use (path_parts.hpp).
#pragma once

#include "admission/verdict.hpp"
#include "conf/config.hpp"
#include "gateway/auth/key_lease.hpp"
#include "gateway/auth/key_store.hpp"
#include "gateway/budget/budgets.hpp"
#include "gateway/http/client_request.hpp"
#include "gateway/path/access_log.hpp"

#include <optional>

namespace dpgate::metrics {
class GatewayMetrics;
}

namespace dpgate::gateway {

class ClientConnection;
struct PathShared;
class PathLocal;
struct KeyLocal;

struct RequestContext {
    ClientConnection& connection;
    PathShared& shared;
    PathLocal& local;
    // One config for the whole request: a reload while it runs changes
    // nothing here (every loaded config stays alive).
    const conf::Config& config;
    ClientRequest& request;
    AccessRecord& record;  // the access-log line; record.request_id names the request
    bool keep_alive;
    metrics::GatewayMetrics* metrics;  // null when metrics are off
    std::optional<auth::KeyInfo> key;  // null: no key (auth not required) or not yet authenticated
    // A slot of the key's limits, held by the request until its answer ends
    // (answerEnds, answer.hpp); given back by its destructor however else
    // the request ends.
    auth::KeyLease key_lease;
    // The key's budgets and usage (null without a key), the tokens its
    // request holds from admission until its answer ends (RequestOutcome
    // settles them), and what the key has left: the x-ratelimit-* fields of
    // every answer once the request is charged.
    budget::KeyState* budget_key = nullptr;  // set for a key with budgets
    KeyLocal* key_local = nullptr;           // the worker's of the key, once looked up (keyLocal)
    budget::Ticket ticket{};
    std::optional<budget::Headroom> headroom{};
    // Set when the admission pool judged the request already (a large
    // body, request_path.cpp); null otherwise.
    admission::Verdict* judged = nullptr;
};

}  // namespace dpgate::gateway
