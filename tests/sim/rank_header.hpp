#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dpgate::sim {

struct RankHeader {
    std::optional<int> rank;    // a valid pinned rank
    bool out_of_range = false;  // an integer outside [0, dp)
    std::string text;           // the integer as vLLM would print it
};

// Reads X-data-parallel-rank the way vLLM does: Python's int() of the value;
// a value that is not an integer is ignored (empty result), an integer
// outside [0, dp_ranks) is an error the caller answers with 400.
RankHeader parseRankHeader(std::string_view value, int dp_ranks);

}  // namespace dpgate::sim
