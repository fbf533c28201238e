#pragma once
// RFC 8259 validation of every byte, with an explicit stack of at most
// `max_depth` levels, so no input however deep can exhaust the call stack.
// A fault names the JSON path of the value holding it (clipped) and its
// byte offset.
//
// The request scan (request_scan.hpp) uses it three ways: to validate a
// whole body before any reader runs (the plain validation); to name the
// fault whenever the fast validation refuses a body (so both answer in the
// same words); and to check the values no reader uses (On Demand would skip
// them unread: NaN, [1,,2] and bad escapes reached the backend).
//
// Strings are scanned 64 bytes per step (json_string_stop.hpp); UTF-8 is
// checked in a separate SIMD pass (simdjson::validate_utf8).
//
// Where RFC 8259 leaves room, the choice here:
//  - an escaped lone surrogate ("\ud800" not followed by a low surrogate
//    escape, or a lone "\udc00") is refused: the readers refuse it too, as
//    do simdjson and nlohmann::json, and Python's json.loads accepts it into
//    a string that cannot be encoded to UTF-8 for the tokenizer;
//  - a byte order mark is refused (RFC 8259 section 8.1: senders must not add one);
//  - duplicate keys, any number of digits and any top-level value are valid
//    JSON here; what a request may contain is the readers' business.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/clip_json_path.hpp"
#include "common/fast_paths.hpp"

namespace dpgate::admission {

struct JsonValidation {
    // Arrays and objects nested in each other, the outermost counting 1:
    // {"a":[1]} nests 2 deep. limits.max_json_depth.
    std::uint32_t max_depth = 256;
    bool check_utf8 = true;  // false: the caller has checked that the bytes are UTF-8
    // false: jsonStringStopPlain (the differential tests and fuzz target, DPGATE_PLAIN)
    bool simd = fastPathOn(FastPath::json_string_stop_sse2);
};

struct JsonFault {
    enum class Kind : std::uint8_t {
        empty,         // nothing but whitespace
        invalid_utf8,  // `offset` is the first ill-formed byte; no path
        syntax,        // `what` says which rule
        too_deep,      // a container at depth max_depth + 1 opens at `offset`
    };
    Kind kind = Kind::syntax;
    std::size_t offset = 0;
    // The JSON path of the value holding the fault ("tools[0].function.parameters"),
    // clipped to kMaxJsonPathBytes; empty at the top level.
    std::string path;
    const char* what = "";  // syntax: "malformed JSON (expected ':' after an object key)"
};

class JsonValidator {
public:
    std::optional<JsonFault> validate(std::string_view text, const JsonValidation& options = {});

private:
    // One open container: an object's current key or an array's current index.
    struct Level {
        std::size_t key_offset = 0;
        std::size_t key_bytes = 0;
        std::size_t index = 0;
        bool object = false;
        bool has_key = false;
    };
    std::optional<JsonFault> fault(JsonFault::Kind kind, std::string_view text, const char* at,
                                   const char* what = "") const;
    std::string path(std::string_view text) const;

    std::vector<Level> stack_;  // kept between calls; at most max_depth levels
};

}  // namespace dpgate::admission
