// The admission stage: the request judged before any backend sees it
// (admission/admit.hpp), with the worker's Admitter, the request's config
// and the public window as it is now. Times itself and counts refusals.
#pragma once

#include "admission/verdict.hpp"
#include "gateway/net/net.hpp"
#include "gateway/path/request_context.hpp"

namespace dpgate::gateway {

// On the worker's thread: for bodies under limits.offload_admission_bytes.
// Nullopt when judging the request would keep the worker for long (its
// prompt or the template's work beyond what such a body makes): it is then
// judged with admitOffThread() like a large body.
std::optional<admission::Verdict> admitRequest(RequestContext& c);

// Whether the request's body is large enough to be admitted in the
// admission pool.
bool admitsOffThread(const RequestContext& c);

// The same judgement in the Server's admission pool (admission_pool.hpp),
// with a pool thread's Admitter: a cold count of megabytes takes tens of ms,
// and the worker's other connections (streams mid-answer) are served
// meanwhile. Resumes on the worker with `verdict` set (an out parameter: a
// returned Verdict would be one more in the caller's coroutine frame, over
// Asio's recycling limit).
awaitable<void> admitOffThread(RequestContext& c, admission::Verdict& verdict);

}  // namespace dpgate::gateway
