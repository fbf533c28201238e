#pragma once
// Where a JSON string's plain run ends: the first byte that is a quote, a
// backslash or a control character (below U+0020), or `end`. Everything
// else (UTF-8 included) is plain; JsonValidator checks UTF-8 in its own pass.
//
// jsonStringStop() scans 64 bytes per step with SSE2 (base64 images are
// megabytes of plain bytes); jsonStringStopPlain() is its byte-at-a-time
// twin, which the differential tests and the JSON fuzz target compare it to
// and JsonValidation::simd = false selects (the fast path
// json_string_stop_sse2, common/fast_paths.hpp).
namespace dpgate::admission {

const char* jsonStringStop(const char* p, const char* end) noexcept;
const char* jsonStringStopPlain(const char* p, const char* end) noexcept;

// The bytes that end a plain run.
inline bool isJsonStringStop(char c) noexcept { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; }

}  // namespace dpgate::admission
