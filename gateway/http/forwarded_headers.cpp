#include "gateway/http/forwarded_headers.hpp"

#include "gateway/http/head_fields.hpp"
#include "gateway/http/head_writer.hpp"
#include "gateway/http/http_grammar.hpp"

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
// no string comparison for the fields a message usually has (nine iequals
// per field cost ~1 % of dpgate's CPU in a profile).
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
    for (size_t i = 0; i < from.size(); ++i) {
        const HeadFields::Field& field = from.at(i);
        const std::string_view name = from.nameOf(field);
        // Every hop-by-hop name is a known field; an unknown one never is.
        if (isHopByHop(field.name) || also_drop.contains(field.name, name)) continue;
        if (std::any_of(named.begin(), named.end(), [&](std::string_view n) { return grammar::iequals(name, n); }))
            continue;
        emit(field);
    }
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
    // Lines that lie one after another in the head's copy are copied as one
    // piece: usually all the fields that cross, one copy for the lot.
    std::string_view run;
    auto flush = [&] {
        if (!run.empty()) w.put(run);
        run = {};
    };
    forEachEndToEndField(from, also_drop, [&](const HeadFields::Field& field) {
        const std::string_view line = from.lineOf(field);
        if (line.empty()) {
            flush();
            w.put(from.nameOf(field)).put(": ").put(from.valueOf(field)).put("\r\n");
        } else if (!run.empty() && run.data() + run.size() == line.data()) {
            run = {run.data(), run.size() + line.size()};
        } else {
            flush();
            run = line;
        }
    });
    flush();
}

}  // namespace dpgate::gateway
