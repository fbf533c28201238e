#pragma once
// A JSON path as an error names it ("tools[0].function.parameters"): a path
// taken from a request can be as long as the request is deep, and an error
// quoting it whole grew to hundreds of kilobytes.
#include <cstddef>
#include <string>

#include "common/api_error.hpp"

namespace dpgate::admission {

inline constexpr std::size_t kMaxJsonPathBytes = 256;
// Each key in a path is cut to this many bytes.
inline constexpr std::size_t kMaxJsonPathKeyBytes = 40;

// `path` cut to at most kMaxJsonPathBytes on a character boundary, ending in
// "..." when it was cut.
inline std::string clipJsonPath(std::string path) {
    if (path.size() <= kMaxJsonPathBytes) return path;
    path.resize(clipUtf8(path, kMaxJsonPathBytes - 3).size());
    path += "...";
    return path;
}

}  // namespace dpgate::admission
