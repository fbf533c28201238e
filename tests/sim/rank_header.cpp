#include "rank_header.hpp"

namespace dpgate::sim {

RankHeader parseRankHeader(std::string_view value, int dp_ranks) {
    RankHeader result;
    constexpr std::string_view kSpace = " \t\r\n\v\f";
    auto first = value.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return result;
    value = value.substr(first, value.find_last_not_of(kSpace) - first + 1);
    bool negative = false;
    if (value.front() == '+' || value.front() == '-') {
        negative = value.front() == '-';
        value.remove_prefix(1);
    }
    // Digits, with single underscores between digits as Python allows.
    std::string digits;
    bool previous_digit = false;
    for (char c : value) {
        if (c >= '0' && c <= '9') {
            digits += c;
            previous_digit = true;
        } else if (c == '_' && previous_digit) {
            previous_digit = false;
        } else {
            return result;
        }
    }
    if (digits.empty() || !previous_digit) return result;
    auto nonzero = digits.find_first_not_of('0');
    digits = nonzero == std::string::npos ? "0" : digits.substr(nonzero);
    if (digits == "0") negative = false;
    result.text = negative ? "-" + digits : digits;
    if (negative || digits.size() > 9 || std::stol(digits) >= dp_ranks) {
        result.out_of_range = true;
        return result;
    }
    result.rank = static_cast<int>(std::stol(digits));
    return result;
}

}  // namespace dpgate::sim
