// The access log: one JSON line per request (log.access: stdout | stderr |
// off | PATH). It says who asked (the key's name and hash prefix, never the
// key), where it went (backend, rank), what came of it (status, tokens,
// timings, bytes, the refusal's reason) — never prompt or completion text.
//
// Lines are formatted on the request's worker and buffered there; a worker
// writes its buffer with one write(2) when it grows past a few KiB or a
// quarter second after its first line, so logging costs no syscall per
// request and lines from threads never interleave.
#pragma once

#include "gateway/platform/cycle_clock.hpp"
#include "gateway/usage/stream_usage.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dpgate::gateway {

// What a request's access line says besides its texts: plain values, so
// that a record is reset by one assignment (AccessRecord::reset).
struct AccessFacts {
    CycleClock::time_point started = CycleClock::now();
    // When the request began, on the wall clock. Unset, the access line
    // derives it from `started` (no wall-clock read per request unless logged).
    std::chrono::system_clock::time_point time{};
    int rank = -1;
    unsigned status = 0;  // 0: the client left before an answer
    bool stream = false;
    uint32_t images = 0;
    std::optional<Usage> usage;
    double ttfb_seconds = -1;  // < 0: no byte was sent
    uint64_t bytes_in = 0;     // request body
    uint64_t bytes_out = 0;    // response body as relayed
    uint32_t retries = 0;
    // The side that went away mid-stream ("client", "upstream"); null when
    // the answer was whole. Counted in metrics, not printed.
    const char* stream_abort = nullptr;
    // dpgate's prompt count and the backend's usage.prompt_tokens, when they
    // differ (count_check.hpp); the line has no count_mismatch when they agree.
    struct CountMismatch {
        uint64_t dpgate = 0;
        uint64_t backend = 0;
    };
    std::optional<CountMismatch> count_mismatch;
};

struct AccessRecord : AccessFacts {
    std::string request_id;
    std::string method;
    std::string path;  // without the query
    std::string key_name;
    std::string key_hash;   // KeyInfo::hash_prefix
    std::string backend;    // empty: answered by dpgate itself
    std::string rejection;  // the error code of a refusal (context_length_exceeded, invalid_api_key, ...)

    // Every field as a new record has it (`started` is now), the strings'
    // buffers kept: a connection reuses one record for all its requests, so
    // the request id and the path (longer than a string holds inline) cost
    // no allocation per request.
    void reset();
};

// The record as one JSON object and a newline, appended to `out` (the
// worker's batch of lines). Pure.
void appendAccessLine(std::string& out, const AccessRecord& record, CycleClock::time_point now);
// The same line on its own, for tests.
std::string formatAccessLine(const AccessRecord& record, CycleClock::time_point now);

// Where the lines go. Opened at start and on reload (so a rotated file is
// reopened); shared by the workers.
class AccessLogSink {
public:
    // "off" gives a sink that is not enabled(); a PATH is opened for append
    // (created 0640). Throws std::runtime_error naming the path on failure.
    static std::shared_ptr<AccessLogSink> open(const std::string& target);
    ~AccessLogSink();
    AccessLogSink(const AccessLogSink&) = delete;
    AccessLogSink& operator=(const AccessLogSink&) = delete;

    bool enabled() const { return fd_ >= 0; }
    // Writes whole lines (retrying short writes). A failed write drops the
    // lines: a full disk or a closed pipe must not stop the gateway.
    void write(std::string_view lines);
    const std::string& target() const { return target_; }

private:
    AccessLogSink(int fd, bool owned, std::string target) : fd_(fd), owned_(owned), target_(std::move(target)) {}
    int fd_;
    bool owned_;
    std::string target_;
};

}  // namespace dpgate::gateway
