// The one URL shape a backend may have: http(s)://host:port, no path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpgate::conf {

struct BackendUrl {
    std::string scheme;  // "http" | "https"
    std::string host;    // a name, an IPv4 address, or an IPv6 address without its brackets
    uint16_t port = 0;   // 80 / 443 when the URL names none

    bool operator==(const BackendUrl&) const = default;
};

// nullopt for anything else: other schemes, userinfo, a path beyond "/",
// a query, a fragment, port 0 or above 65535, an empty host.
std::optional<BackendUrl> parseBackendUrl(std::string_view url);

}  // namespace dpgate::conf
