#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace dpgate::sim {

// Failure modes a real container shows and the gateway must survive.
enum class FaultMode {
    kNone,
    kRefuse,     // close new and idle keep-alive API connections, answer nothing
    kStatus,     // answer every /v1/* request with `status` and an error body
    kHang,       // read the request, never answer, keep the connection open
    kCutStream,  // close a stream abruptly after `after_chunks` SSE events
    kSlow,       // `chunk_delay_ms` extra between stream chunks
    kUnhealthy,  // GET /health answers 503; the API keeps working
};

struct FaultConfig {
    FaultMode mode = FaultMode::kNone;
    int status = 500;
    std::uint64_t after_chunks = 1;
    std::uint64_t chunk_delay_ms = 100;
    // cut_stream: the N-th event and the close leave in one TCP segment (the
    // end of stream arrives with the event's bytes), instead of the close
    // coming after the next token's decode time.
    bool close_with_event = false;
    // Not a failure mode but a lie, kept across mode changes: usage reports
    // prompt_tokens = counted + count_offset (at least 0), so a test can prove
    // that the gateway notices a backend that counts differently.
    std::int64_t count_offset = 0;
};

inline constexpr std::int64_t kMaxCountOffset = std::int64_t{1} << 40;

std::string_view faultModeName(FaultMode mode);
std::optional<FaultMode> parseFaultMode(std::string_view name);

// `{"mode":"status","status":503}` -> FaultConfig. A body with "mode" sets
// the failure mode, its fields not given taking the defaults above; one
// with "count_offset" sets the offset; what the body does not name stays as
// in `current`. Returns nullopt and sets `error` on a bad document.
std::optional<FaultConfig> parseFaultJson(std::string_view body, const FaultConfig& current, std::string& error);
// CLI form: MODE or MODE:N, N being the status, after_chunks or chunk_delay_ms.
std::optional<FaultConfig> parseFaultSpec(std::string_view spec, std::string& error);
// count_offset is shown only when it is not 0.
std::string faultToJson(const FaultConfig& fault);

// The current fault, read by every request and written by POST /sim/fault.
class FaultState {
public:
    explicit FaultState(FaultConfig initial) : config_(initial) {}
    FaultConfig get() const {
        std::lock_guard lock(mutex_);
        return config_;
    }
    void set(const FaultConfig& config) {
        std::lock_guard lock(mutex_);
        config_ = config;
    }

private:
    mutable std::mutex mutex_;
    FaultConfig config_;
};

}  // namespace dpgate::sim
