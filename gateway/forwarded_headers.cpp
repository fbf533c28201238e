#include "gateway/forwarded_headers.hpp"

#include "gateway/head_fields.hpp"
#include "gateway/head_writer.hpp"
#include "gateway/http_grammar.hpp"

#include <boost/beast/core/string.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <array>

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

// Calls `emit(name, value)` for every field of `from` that crosses the gateway.
template <class Emit>
void forEachEndToEndField(const HeadFields& from, const FieldNames& also_drop, Emit&& emit) {
    // Field names listed in Connection are hop-by-hop for this message only.
    boost::container::small_vector<std::string_view, 4> named;
    from.each([&](http::field id, std::string_view, std::string_view v) {
        if (id != http::field::connection) return;
        while (!v.empty()) {
            size_t comma = v.find(',');
            std::string_view token = v.substr(0, comma);
            while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
            while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
            if (!token.empty()) named.push_back(token);
            if (comma == std::string_view::npos) break;
            v.remove_prefix(comma + 1);
        }
    });
    from.each([&](http::field id, std::string_view name, std::string_view value) {
        // Every hop-by-hop name is a known field; an unknown one never is.
        if (isHopByHop(id) || also_drop.contains(id, name)) return;
        for (std::string_view n : named)
            if (grammar::iequals(name, n)) return;
        emit(name, value);
    });
}

}  // namespace

FieldNames::FieldNames(std::initializer_list<std::string_view> names) {
    for (std::string_view name : names) {
        const http::field id = http::string_to_field(beast::string_view(name.data(), name.size()));
        if (id == http::field::unknown) {
            unknown_.push_back(name);
        } else {
            ids_[size_t(id) / 64] |= uint64_t(1) << (size_t(id) % 64);
        }
    }
}

bool FieldNames::containsUnknown(std::string_view name) const {
    for (std::string_view n : unknown_)
        if (grammar::iequals(name, n)) return true;
    return false;
}

void appendEndToEndFields(const HeadFields& from, std::string& head, const FieldNames& also_drop) {
    HeadWriter w(head, 256);  // a hint: a longer head grows the string
    forEachEndToEndField(from, also_drop, [&](std::string_view name, std::string_view value) {
        w.put(name).put(": ").put(value).put("\r\n");
    });
}

}  // namespace dpgate::gateway
