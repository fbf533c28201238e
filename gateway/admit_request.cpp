#include "gateway/admit_request.hpp"

#include "gateway/server.hpp"
#include "gateway/worker.hpp"

#include <chrono>

namespace dpgate::gateway {

admission::Verdict admitRequest(RequestContext& c) {
    std::string_view target = c.request.target();
    const admission::Endpoint endpoint = target.substr(0, target.find('?')) == "/v1/completions"
                                             ? admission::Endpoint::completions
                                             : admission::Endpoint::chat_completions;
    const auto start = std::chrono::steady_clock::now();
    admission::Verdict verdict =
        c.worker.admitter().admit(c.request.body(), c.request.body().capacity(), endpoint,
                                  c.worker.admissionLimits(c.config, c.server.backends().publicWindow()));
    // A refusal without a code of its own is counted and answered as
    // invalid_request_error.
    auto* refused = std::get_if<admission::Refused>(&verdict);
    if (refused && refused->code.empty()) refused->code = "invalid_request_error";
    if (c.metrics) {
        c.metrics->admission_seconds.observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        if (refused) c.metrics->admission_rejections.with({refused->code}).inc();
    }
    if (auto* admitted = std::get_if<admission::Admitted>(&verdict)) {
        c.record.stream = admitted->stream;
        c.record.images = admitted->images;
    }
    return verdict;
}

}  // namespace dpgate::gateway
