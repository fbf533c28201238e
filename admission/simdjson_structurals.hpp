#pragma once
// The structural index simdjson's stage 1 leaves in an On-Demand parser
// after iterate() (offsets of every '{' '}' '[' ']' ':' ',' and of every
// scalar's first byte), for jsonDepthWithin. simdjson keeps it private
// (ondemand::parser::implementation); this file alone reaches it, and only
// for the simdjson version it was written against. With any other version
// it returns nothing and the scan validates with the plain JsonValidator,
// the same path Admitter::setFastJsonValidation(false) and the fast path
// switch simdjson_structurals (common/fast_paths.hpp) take.
#include <simdjson.h>

#include <cstdint>
#include <span>

namespace dpgate::admission {

// Valid until the parser's next iterate(); empty when not available.
std::span<const std::uint32_t> simdjsonStructurals(const simdjson::ondemand::parser& parser);

}  // namespace dpgate::admission
