// The seam between deciding where a request goes and moving its bytes: the
// retry loop (retry.hpp) asks a connector for one try on a leased slot and
// learns how it went. The UpstreamExchange is the connector that speaks HTTP to a
// backend; tests put a scripted one in its place, so retry and lease
// behaviour are tested without sockets.
#pragma once

#include "gateway/backends/router.hpp"
#include "gateway/net/net.hpp"

#include <string>

namespace dpgate::gateway {

struct UpstreamAnswer {
    enum class Kind {
        answered,     // the answer's head arrived (any status); the connector holds it
        failed,       // connect, write or read failed before an answer
        timed_out,    // no answer within the first-byte deadline: the backend may still be working
        client_gone,  // the client hung up meanwhile: nothing more to do
    };
    Kind kind = Kind::failed;
    unsigned status = 0;  // when answered
    std::string error;    // when failed or timed out: why
};

class UpstreamConnector {
public:
    virtual ~UpstreamConnector() = default;
    // One try: the request to the leased (backend, rank), up to the answer's head.
    virtual awaitable<UpstreamAnswer> send(const SlotLease& slot) = 0;
};

}  // namespace dpgate::gateway
