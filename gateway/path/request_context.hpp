// What one request carries through its stages (request_path.hpp): where it
// came from, the config it is served under, who is calling, and what it holds.
#pragma once

#include "admission/verdict.hpp"
#include "conf/config.hpp"
#include "gateway/auth/key_lease.hpp"
#include "gateway/auth/key_store.hpp"
#include "gateway/http/client_request.hpp"
#include "gateway/path/access_log.hpp"

#include <optional>

namespace dpgate::metrics {
class GatewayMetrics;
}

namespace dpgate::gateway {

class ClientSession;
class Server;
class Worker;

struct RequestContext {
    ClientSession& session;
    Worker& worker;
    Server& server;
    // One config for the whole request: a reload while it runs changes
    // nothing here (every loaded config stays alive, server.hpp).
    const conf::Config& config;
    ClientRequest& request;
    AccessRecord& record;  // the access-log line; record.request_id names the request
    bool keep_alive;
    metrics::GatewayMetrics* metrics;  // null when metrics are off
    std::optional<auth::KeyInfo> key;  // null: no key (auth not required) or not yet authenticated
    auth::KeyLease key_lease;
    // Set when the worker's admission thread judged the request already
    // (a large body, request_path.cpp); null otherwise.
    admission::Verdict* judged = nullptr;
};

}  // namespace dpgate::gateway
