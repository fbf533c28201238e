#pragma once

#include "connection_registry.hpp"
#include "sim_context.hpp"

namespace dpgate::sim {

// Serves one keep-alive client connection until it closes, on the socket's
// strand. Routes:
//   POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
//   GET /health, GET /metrics                       -- the vLLM API
//   GET|POST /sim/fault, GET /sim/stats, POST /sim/reset -- test control,
//                                                     never subject to faults
//
// Fault control lives on the same port as the API. The refuse fault is
// decided per request, after its header is read: a request that is not
// /sim/* gets its connection closed without a byte of answer (to a client
// this is "connected, then EOF", as from a container that just died), and
// setting refuse also closes every idle keep-alive connection that never
// carried a /sim/* request. So a test can always reach /sim/fault, on a new
// connection or on the one it used to set the fault.
void startHttpSession(SimContext& context, Socket socket);

}  // namespace dpgate::sim
