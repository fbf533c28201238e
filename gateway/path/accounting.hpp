// The last stage: what a relayed answer taught. The backend's usage checks
// dpgate's prompt count (count_check.hpp), corrects the slot's work charge
// and feeds the per-slot token counters. The request's metrics (counter,
// duration, time to first byte, retries, stream aborts) are recorded from
// its access record once it has ended, however it ended.
#pragma once

#include "admission/verdict.hpp"
#include "gateway/backends/router.hpp"
#include "gateway/path/request_context.hpp"

namespace dpgate::gateway {

void accountAnswer(RequestContext& c, SlotLease& lease, const admission::Admitted& admitted);

// Held from the moment a request is counted (it passed auth and its key's
// limits) until it ends.
class RequestOutcome {
public:
    explicit RequestOutcome(RequestContext& c) : c_(c) {}
    ~RequestOutcome();
    RequestOutcome(const RequestOutcome&) = delete;
    RequestOutcome& operator=(const RequestOutcome&) = delete;

private:
    RequestContext& c_;
};

}  // namespace dpgate::gateway
