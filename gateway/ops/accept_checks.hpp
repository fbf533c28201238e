// The acceptance checklist against one backend (the operators' checklist,
// ../shared/reference/), run through dpgate's own code: its probe, its
// metrics parser, its admission (limits, exact counts) and rank pinning by
// X-data-parallel-rank. Each check yields one verdict; none measures time.
//
//   models          /health 200; /v1/models serves the model id with
//                   max_model_len equal to the configured window
//   metrics_ranks   the backend's /metrics shows every configured DP rank
//   rank_answers    a text answer on every rank, pinned; the rank's own
//                   prompt-token counter moved by that request's tokens
//   stream          an SSE stream ending in [DONE], with a usage chunk
//   prefix_cache    one synthetic prompt twice on one rank: cached_tokens > 0
//   tool_call       a forced tool call, then its result, answered
//   images_16       16 images answered
//   images_640      640 images answered; 641 refused by admission
//   window_edge     exactly the window admitted and answered; one token
//                   over refused by admission (and by the backend)
//   count_agreement dpgate's prompt count = usage.prompt_tokens on text,
//                   tools, tool calls and multi-turn history
#pragma once

#include "admission/admit.hpp"
#include "conf/config.hpp"
#include "gateway/acceptance/acceptance_record.hpp"
#include "gateway/net/net.hpp"

#include <functional>

namespace dpgate::acceptance {

struct AcceptInputs {
    const conf::Config& config;
    const conf::BackendConfig& backend;
    admission::Admitter& admitter;  // with the model's tokenizer and template
};

// Runs every check (a failed one does not stop the rest), calls `verdict`
// as each ends, and returns the record without dpgate's digests.
gateway::awaitable<AcceptanceRecord> runChecks(const AcceptInputs& inputs,
                                               const std::function<void(const CheckResult&)>& verdict);

}  // namespace dpgate::acceptance
