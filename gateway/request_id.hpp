#pragma once

#include <random>
#include <string>
#include <string_view>

namespace dpgate::gateway {

// The client's X-Request-ID when it is a sane token (1-128 visible ASCII
// characters), else a fresh 128-bit hex id: log lines and upstream logs must
// not be injectable through it.
std::string requestIdFor(std::string_view client_value, std::mt19937_64& random);

}  // namespace dpgate::gateway
