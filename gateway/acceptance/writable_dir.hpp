#pragma once
// Whether dpgate can write its records into a folder, asked at start-up
// rather than at the first flip or drain, when it is too late to fix.
#include <string>

namespace dpgate::acceptance {

// Creates `dir` if it is missing, then writes and removes a probe file in
// it. Empty when that worked; otherwise what failed, naming `key` (the
// config key that set the folder, e.g. "state.dir").
std::string writableDirProblem(const std::string& dir, const std::string& key);

}  // namespace dpgate::acceptance
