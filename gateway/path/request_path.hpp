// One request's story, stage by stage (docs/ARCHITECTURE.md, "A request's path"):
//
//   authenticate        caller.hpp             who is calling (every /v1/ path)
//   lease the key       caller.hpp             a slot of the key's limits, held until the answer ends
//   read the body       client_connection.hpp  only now, held against limits.max_buffered_body_bytes
//   admit               admit_request.hpp      what cannot succeed is refused before any backend sees it
//   plan the route      router.hpp             the conversation's slot (a retry orders the others)
//   forward with retry  retry.hpp              one try and one retry through the exchange (upstream_exchange.hpp)
//   relay the answer    body_pump.hpp          the answer's bytes to the client as they come (usage_tap.hpp)
//   account             accounting.hpp         what the answer's usage teaches
//
// Every answer ends through answer.hpp: the key's slot given back just
// before its last bytes, its outcome put into the access record once.
//
// The stages before the body decide from the head alone (401, 404, 405,
// 429, and 400 for a field given twice): a client is answered before it
// sends a body byte it would send in vain, and the connection discards that
// body. Paths that are not completions (/health, /v1/models, and /metrics
// for a key that may: metrics_tunnel.hpp) are answered here.
#pragma once

#include "gateway/net/net.hpp"
#include "gateway/path/request_context.hpp"

namespace dpgate::gateway {

// Returns whether the client connection may serve another request. The
// checks before admission run at the call, not in a coroutine frame; what
// they decide (a refusal, a local answer, the proxied path) is the returned
// coroutine.
awaitable<bool> serveRequest(RequestContext& c);

}  // namespace dpgate::gateway
