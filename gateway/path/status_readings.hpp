// Counts the process keeps (the Server implements them), read for
// /admin/status and for dpgate's own /metrics page on either port. Declared
// here, below ops/, so that the client port's /metrics can read them too.
#pragma once

#include <cstdint>

namespace dpgate::gateway {

class StatusReadings {
public:
    virtual ~StatusReadings() = default;
    virtual int64_t openConnections() const = 0;
    virtual int64_t requestsInFlight() const = 0;
    virtual uint64_t bufferedBodyBytes() const = 0;
};

}  // namespace dpgate::gateway
