// What `dpgate accept` saves about one backend (accept-<backend>-<UTC>.json)
// and what the gateway reads back: who the backend said it was, which dpgate
// judged it, and each check with its verdict. Pure: no sockets, no files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::acceptance {

// What a backend says of itself. Empty strings: not reported.
struct BackendIdentity {
    std::string model_id;
    uint64_t max_model_len = 0;
    std::string version;  // GET /version's "version"
    std::string server;   // the Server header of GET /v1/models

    bool operator==(const BackendIdentity&) const = default;
};

struct CheckResult {
    std::string name;  // stable: "models", "metrics_ranks", ... (see accept_checks.hpp)
    bool passed = false;
    std::string detail;  // one line, no timings

    bool operator==(const CheckResult&) const = default;
};

struct AcceptanceRecord {
    std::string backend;  // the configured name
    std::string url;
    std::string time;  // UTC, "2026-12-03T18:04:05Z"
    bool passed = false;
    uint64_t configured_window = 0;
    uint32_t dp_ranks = 0;
    BackendIdentity identity;
    std::string dpgate_version;
    std::string config_digest;     // sha256 of the config file's bytes
    std::string template_digest;   // sha256 of the chat template's source; "" = none
    std::string tokenizer_digest;  // sha256 of tokenizer.json; "" = none
    std::vector<CheckResult> checks;

    bool operator==(const AcceptanceRecord&) const = default;
};

inline constexpr std::string_view kRecordFormat = "dpgate-acceptance/1";

// Pretty JSON with "format": kRecordFormat, ending in a newline.
std::string recordJson(const AcceptanceRecord& record);

// A record file's text; nullopt with `error` set when it is not one (any
// other format, a missing or mistyped field). Never throws.
std::optional<AcceptanceRecord> parseRecord(std::string_view text, std::string& error);

// "accept-<backend>-20261203T180405Z.json"; characters of the name outside
// [A-Za-z0-9._-] become '_' (the record itself keeps the exact name).
std::string recordFileName(std::string_view backend, std::string_view time);

// What differs between a record's identity and what the backend reports
// now, one phrase each: "version '0.9.1' (the record says '0.9.0')".
std::vector<std::string> identityDifferences(const BackendIdentity& recorded, const BackendIdentity& now);

// `dpgate accept --compare`: one line per difference (identity, dpgate's
// version and digests, and each check whose verdict changed); empty when
// the two records agree on all of them.
std::vector<std::string> compareRecords(const AcceptanceRecord& before, const AcceptanceRecord& after);

// Now in UTC as "2026-12-03T18:04:05Z".
std::string utcNow();

}  // namespace dpgate::acceptance
