#include "conf/backend_url.hpp"

#include <algorithm>
#include <charconv>

namespace dpgate::conf {

namespace {

bool isHostChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

bool isIpv6Char(char c) {
    return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' || c == '.';
}

}  // namespace

std::optional<BackendUrl> parseBackendUrl(std::string_view url) {
    BackendUrl out;
    std::string_view rest;
    if (url.starts_with("http://")) {
        out.scheme = "http";
        out.port = 80;
        rest = url.substr(7);
    } else if (url.starts_with("https://")) {
        out.scheme = "https";
        out.port = 443;
        rest = url.substr(8);
    } else {
        return std::nullopt;
    }
    // Only a bare trailing "/" is tolerated: the gateway forwards the client's
    // path unchanged, so a base path here would silently be ignored.
    if (rest.ends_with('/')) rest.remove_suffix(1);

    std::string_view host;
    std::string_view port_text;
    if (rest.starts_with('[')) {
        const std::size_t close = rest.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        host = rest.substr(1, close - 1);
        if (host.empty() || !std::all_of(host.begin(), host.end(), isIpv6Char)) return std::nullopt;
        std::string_view after = rest.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') return std::nullopt;
            port_text = after.substr(1);
            if (port_text.empty()) return std::nullopt;
        }
    } else {
        const std::size_t colon = rest.find(':');
        host = rest.substr(0, colon);
        if (colon != std::string_view::npos) {
            port_text = rest.substr(colon + 1);
            if (port_text.empty()) return std::nullopt;
        }
        if (host.empty() || !std::all_of(host.begin(), host.end(), isHostChar)) return std::nullopt;
    }
    if (!port_text.empty()) {
        if (!std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return std::nullopt;
        unsigned port = 0;
        auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
            return std::nullopt;
        out.port = static_cast<uint16_t>(port);
    }
    out.host = std::string(host);
    return out;
}

}  // namespace dpgate::conf
