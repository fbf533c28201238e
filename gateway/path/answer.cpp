#include "gateway/path/answer.hpp"

#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/path/budget_gate.hpp"
#include "gateway/path/client_connection.hpp"
#include "gateway/path/path_parts.hpp"

#include <chrono>

namespace dpgate::gateway {

void answerEnds(RequestContext& c) noexcept { c.key_lease.release(); }

void completeAnswer(RequestContext& c, const AnswerOutcome& outcome) {
    AccessRecord& record = c.record;
    if (!outcome.backend.empty()) {
        record.backend.assign(outcome.backend);
        record.rank = outcome.rank;
    }
    record.status = outcome.status;
    record.bytes_out = outcome.bytes_out;
    if (outcome.first_byte_at)
        record.ttfb_seconds = std::chrono::duration<double>(*outcome.first_byte_at - record.started).count();
    if (outcome.stream_abort) record.stream_abort = outcome.stream_abort;
    if (!outcome.rejection.empty()) record.rejection = outcome.rejection;
    if (outcome.usage) record.usage = outcome.usage;
    if (c.metrics && c.key) keyLocal(c).answer(c.key->name, outcome.status, *c.metrics).inc();
}

awaitable<bool> writeAnswer(RequestContext& c, http::response<http::string_body>& response, AnswerOutcome& outcome) {
    answerEnds(c);
    const ClientConnection::Written written = co_await c.connection.writeResponse(response, c.config.limits);
    outcome.status = response.result_int();
    outcome.bytes_out = written.body_bytes;
    completeAnswer(c, outcome);
    co_return written.ok;
}

awaitable<bool> RelayedAnswer::answerWith(http::response<http::string_body>& response) {
    handed_over_ = true;
    co_return co_await writeAnswer(c_, response, outcome_);
}

http::response<http::string_body> errorResponse(const RequestContext& c, const ApiError& error, bool keep_alive,
                                                http::field extra, std::string_view extra_value) {
    http::response<http::string_body> response{static_cast<http::status>(error.http_status), 11};
    response.set(http::field::content_type, "application/json");
    response.set("X-Request-ID", c.record.request_id);
    if (extra != http::field::unknown) response.set(extra, extra_value);
    if (c.headroom) setRateLimitFields(response, *c.headroom);
    response.keep_alive(keep_alive);
    response.body() = error.body();
    return response;
}

awaitable<bool> refuse(RequestContext& c, const ApiError& error, bool keep_alive, http::field extra,
                       std::string_view extra_value) {
    http::response<http::string_body> response = errorResponse(c, error, keep_alive, extra, extra_value);
    AnswerOutcome outcome;
    outcome.rejection = error.code;
    const bool written = co_await writeAnswer(c, response, outcome);
    co_return written&& response.keep_alive();
}

}  // namespace dpgate::gateway
