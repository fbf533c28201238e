#pragma once
// The depth bound of the fast JSON validation: arrays and objects nested at
// most `max_depth` deep, counted over the structural index simdjson's stage 1
// built (json offsets of every '{' '}' '[' ']' ':' ',' and scalar start)
// rather than over every byte, one table lookup per token and no branch
// that depends on the input. It runs before any reader, so no reader meets a
// body nested deeper than the limit; the readers check everything else
// (request_scan.cpp: On Demand refuses invalid JSON in what it reads, and
// what no reader uses is checked by JsonValidator where it is skipped).
// A body it refuses is named by the plain JsonValidator (path, offset).
#include <cstdint>
#include <span>
#include <string_view>

namespace dpgate::admission {

// `structurals`: the offsets stage 1 found in `text`, without simdjson's end sentinel.
bool jsonDepthWithin(std::string_view text, std::span<const std::uint32_t> structurals, std::uint32_t max_depth);

}  // namespace dpgate::admission
