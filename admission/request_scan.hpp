#pragma once
// A /v1/chat/completions or /v1/completions body: validated whole as JSON
// (json_validator.hpp), then one pass with simdjson On-Demand that reads the
// fields admission judges and the ones vLLM hands the chat template
// (docs/VLLM_RENDERING.md), and skips the rest (base64 image URLs are
// type-checked, never unescaped or copied).
//
// Every string_view in a ScannedRequest points into the scanner's parser
// (its string buffer holds unescaped strings), so it stays valid until the
// next scan() on the same RequestScanner. The body must stay alive and
// unmodified as long, with kScanPaddingBytes readable bytes after its end.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/admission_limits.hpp"
#include "admission/endpoint.hpp"
#include "admission/template/chat_request.hpp"

namespace dpgate::admission {

// simdjson's SIMDJSON_PADDING: bytes past the body's end the scan may read.
inline constexpr std::size_t kScanPaddingBytes = 64;

// An integer field as sent: absent, or an integer (possibly far out of any
// range, e.g. 2^64 or -5) to be range-checked by the rules.
struct ScannedInteger {
    bool present = false;
    bool fits_int64 = true;  // false: beyond int64, `value` meaningless
    std::int64_t value = 0;
    std::string_view text;  // the number as written
};

// tool_choice as sent: unset (absent), null, "none", "auto", "required", or a named function.
enum class ToolChoice : std::uint8_t { unset, null, none, auto_, required, named };

struct ScannedRequest {
    bool has_model = false;
    std::string_view model;
    ScannedInteger max_tokens;
    ScannedInteger max_completion_tokens;
    bool stream = false;
    bool include_usage = false;
    bool has_stream_options = false;  // the key is present (even as null)
    bool has_prompt_cache_key = false;
    std::string_view prompt_cache_key;
    std::string_view user;
    std::uint64_t n = 1;      // UINT64_MAX: an integer beyond int64
    std::string_view n_text;  // `n` as written
    // Offset of the body's opening '{', where `"max_tokens":N,` is spliced.
    std::size_t open_brace_offset = 0;

    ChatRequest chat;  // chat completions
    ToolChoice tool_choice = ToolChoice::unset;
    std::string_view tool_choice_name;
    // Completions: `prompt` strings (one per sequence) or token-id arrays
    // (their lengths); a request has one form or the other.
    std::vector<std::string_view> prompt_texts;
    std::vector<std::uint64_t> prompt_id_counts;
};

struct ScanError {
    // JSON path of the offending field ("messages[3].content[1].image_url"),
    // at most kMaxJsonPathBytes (clip_json_path.hpp).
    std::string param;
    std::string message;  // starts with the path
};

class RequestScanner {
public:
    RequestScanner();
    ~RequestScanner();
    RequestScanner(const RequestScanner&) = delete;
    RequestScanner& operator=(const RequestScanner&) = delete;

    // `capacity_bytes` >= body.size() + kScanPaddingBytes lets the scan read
    // the body in place; otherwise it is copied into a padded buffer first.
    // The whole body is validated as JSON (RFC 8259, JsonValidator) with at
    // most `max_json_depth` levels of nesting (capped at kMaxJsonDepthCap)
    // before any field is read. Values of the chat request (tools, tool
    // calls, template kwargs) are built in `arena`, which the caller resets
    // between requests.
    std::optional<ScanError> scan(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                                  std::uint32_t max_json_depth, jinja::Arena& arena, ScannedRequest& out);

    // False: validate every body with the plain JsonValidator before the
    // scan, never the fast way (stage 1, jsonDepthWithin over its structural
    // index, then the readers checking what they read and what they skip);
    // the tests and the fuzz target that compare the two. By default the
    // fast way unless DPGATE_PLAIN turns simdjson_structurals off.
    void setFastJsonValidation(bool on);

    // Which simdjson kernels a scan runs, for the start-up log: stage 1 (the
    // SIMD pass over the bytes) is simdjson's runtime choice for this CPU;
    // On Demand's stage 2 is the kernel this build was compiled for.
    static std::string simdjsonKernels();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dpgate::admission
