#pragma once
// The usage object in the shape backends write it: keys without escapes,
// counts as plain integers or null, and prompt_tokens_details an object of
// the same shape or null, read without a JSON parser. Anything else (an
// escape, a sign, a fraction, an exponent, a string, an array, 20 digits, a
// leading zero) is unsure and left to simdjson, the plain twin
// (stream_usage.cpp, readUsageDocument), which reads every spelling. The
// fast path written_usage (common/fast_paths.hpp): a usage object per
// answer, read where simdjson's On Demand set-up cost more than the read.
// stream_usage_test and the usage fuzz target compare the two.
#include <string_view>

#include "gateway/usage/stream_usage.hpp"

namespace dpgate::gateway {

// The usage object at the start of `text`: false when unsure; otherwise
// `out` is what simdjson's reader would give. `alone`: nothing but
// whitespace may follow the object.
bool readWrittenUsage(std::string_view text, bool alone, UsageCounts& out) noexcept;

}  // namespace dpgate::gateway
