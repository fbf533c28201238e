// The answer's bytes back to the client as they arrive. A piece read from
// upstream is written to the client before the next piece is read, through
// one bounded buffer, so a slow client slows the upstream read
// (backpressure) instead of growing memory. A client that goes away closes
// the upstream connection, which is how the backend learns to stop.
#pragma once

#include "gateway/net/net.hpp"
#include "gateway/path/request_context.hpp"
#include "gateway/path/upstream_connector.hpp"

namespace dpgate::gateway {

class ClientWatch;
class SlotLease;
class UpstreamExchange;

// Relays the answer `exchange` got from `slot` to the client. The slot's
// prefill is over at the first body byte (or at the answer of a
// non-stream); the access record learns route, status, bytes, timings and
// usage. `stream_usage_added`: dpgate asked upstream for the usage chunk and
// cuts it out of what the client sees. Returns whether the client
// connection may serve another request.
awaitable<bool> pumpAnswer(RequestContext& c, UpstreamExchange& exchange, SlotLease& slot, const ClientWatch& watch,
                           bool stream_usage_added, uint64_t sequences);

// The client's answer for a try that got none (failed or timed out).
awaitable<bool> answerNoAnswer(RequestContext& c, const SlotLease& slot, const UpstreamAnswer& answer);

}  // namespace dpgate::gateway
