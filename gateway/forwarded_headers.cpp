#include "gateway/forwarded_headers.hpp"

#include <boost/beast/core/string.hpp>

#include <array>
#include <vector>

namespace dpgate::gateway {

bool isHopByHop(std::string_view name) {
    static constexpr std::array<std::string_view, 9> kHopByHop = {
        "connection", "keep-alive",         "proxy-connection",   "te", "trailer", "transfer-encoding",
        "upgrade",    "proxy-authenticate", "proxy-authorization"};
    for (std::string_view h : kHopByHop)
        if (beast::iequals(name, h)) return true;
    return false;
}

namespace {

// The same set by Beast's field code, which its parser already looked up:
// no string comparison for the fields a message usually has (the profile of
// issue 18 had the nine iequals per field at ~1 % of dpgate's CPU).
bool isHopByHop(http::field name) {
    switch (name) {
        case http::field::connection:
        case http::field::keep_alive:
        case http::field::proxy_connection:
        case http::field::te:
        case http::field::trailer:
        case http::field::transfer_encoding:
        case http::field::upgrade:
        case http::field::proxy_authenticate:
        case http::field::proxy_authorization: return true;
        default: return false;
    }
}

// Calls `emit(field)` for every field of `from` that crosses the gateway.
template <class Emit>
void forEachEndToEndField(const http::fields& from, std::initializer_list<std::string_view> also_drop, Emit&& emit) {
    // Field names listed in Connection are hop-by-hop for this message only.
    std::vector<std::string_view> named;
    auto [first, last] = from.equal_range(http::field::connection);
    for (auto it = first; it != last; ++it) {
        std::string_view v = it->value();
        while (!v.empty()) {
            size_t comma = v.find(',');
            std::string_view token = v.substr(0, comma);
            while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
            while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
            if (!token.empty()) named.push_back(token);
            if (comma == std::string_view::npos) break;
            v.remove_prefix(comma + 1);
        }
    }
    for (const auto& field : from) {
        // Every hop-by-hop name is a known field; an unknown one never is.
        if (isHopByHop(field.name())) continue;
        std::string_view name = field.name_string();
        bool drop = false;
        for (std::string_view n : named) drop = drop || beast::iequals(name, n);
        for (std::string_view n : also_drop) drop = drop || beast::iequals(name, n);
        if (!drop) emit(field);
    }
}

}  // namespace

void copyEndToEndFields(const http::fields& from, http::fields& to, std::initializer_list<std::string_view> also_drop) {
    forEachEndToEndField(from, also_drop, [&](const auto& field) { to.insert(field.name_string(), field.value()); });
}

void appendEndToEndFields(const http::fields& from, std::string& head,
                          std::initializer_list<std::string_view> also_drop) {
    forEachEndToEndField(from, also_drop, [&](const auto& field) {
        head.append(field.name_string()).append(": ").append(field.value()).append("\r\n");
    });
}

}  // namespace dpgate::gateway
