// The admission stage: the request judged before any backend sees it
// (admission/admit.hpp), with the worker's Admitter, the request's config
// and the public window as it is now. Times itself and counts refusals.
#pragma once

#include "admission/verdict.hpp"
#include "gateway/request_context.hpp"

namespace dpgate::gateway {

admission::Verdict admitRequest(RequestContext& c);

}  // namespace dpgate::gateway
