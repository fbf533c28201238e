// libFuzzer over a client request's head and body, as the client session
// reads them:
// - the framing checks (findHeaderEnd, checkRequestFraming): any bytes must
//   give a self-consistent verdict, never a crash;
// - the request parser (ClientRequestParser, client_request.hpp), fed in
//   pieces: it must say what Beast's own request parser says of the whole
//   input (error or not; request line, fields, keep-alive and body).
#include "gateway/client_request.hpp"
#include "gateway/request_framing.hpp"

#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using namespace dpgate::gateway;

struct Parsed {
    bool failed = false;
    std::string method, target;
    unsigned version = 0;
    bool keep_alive = false;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
};

// Beast's fields keep a repeated name's values together; the gateway's keep
// wire order. Compared grouped by name, each name's values in order.
std::vector<std::pair<std::string, std::string>> grouped(std::vector<std::pair<std::string, std::string>> f) {
    auto lower = [](std::string s) {
        for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::stable_sort(f.begin(), f.end(), [&](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
    return f;
}

// Whole-input verdict: an input that ends before the message does is an error.
void finish(http::basic_parser<true>& parser, error_code& ec) {
    if (ec == http::error::need_more) ec = {};
    if (!ec && !parser.is_done()) ec = http::error::partial_message;
}

Parsed asTheGateway(std::string_view wire, size_t feed) {
    ClientRequestParser parser;
    parser.body_limit(1 << 20);
    parser.eager(true);
    Parsed out;
    error_code ec;
    std::string pending;
    for (size_t at = 0; at < wire.size() && !parser.is_done();) {
        const size_t n = std::min(feed, wire.size() - at);
        pending.append(wire.substr(at, n));
        at += n;
        const size_t used = parser.put(net::buffer(pending), ec);
        pending.erase(0, used);
        if (ec == http::error::need_more) ec = {};
        if (ec) break;
    }
    if (!ec && !parser.is_done()) ec = http::error::partial_message;
    if (ec) {
        out.failed = true;
        return out;
    }
    const ClientRequest request = parser.release();
    out.method = request.method_string();
    out.target = request.target();
    out.version = request.version();
    out.keep_alive = request.keep_alive();
    request.fields().each(
        [&](http::field, std::string_view name, std::string_view value) { out.fields.emplace_back(name, value); });
    out.body = request.body();
    return out;
}

Parsed asBeast(std::string_view wire) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    parser.eager(true);
    error_code ec;
    parser.put(net::buffer(wire.data(), wire.size()), ec);
    finish(parser, ec);
    Parsed out;
    if (ec) {
        out.failed = true;
        return out;
    }
    const auto& request = parser.get();
    out.method = request.method_string();
    out.target = request.target();
    out.version = request.version();
    out.keep_alive = parser.keep_alive();
    for (const auto& f : request) out.fields.emplace_back(f.name_string(), f.value());
    out.body = request.body();
    return out;
}

bool same(const Parsed& a, const Parsed& b) {
    if (a.failed || b.failed) return a.failed == b.failed;
    return a.method == b.method && a.target == b.target && a.version == b.version && a.keep_alive == b.keep_alive &&
           grouped(a.fields) == grouped(b.fields) && a.body == b.body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    bool bad = false;
    size_t end = findHeaderEnd(bytes, bad);
    if (end > size || (bad && end != 0)) std::abort();
    std::string_view head = end != 0 ? bytes.substr(0, end) : bytes;
    auto verdict = checkRequestFraming(head, {4096, 16});
    if (verdict.status != 0 && verdict.status != 400 && verdict.status != 431) std::abort();
    if (verdict.status != 0 && verdict.message.empty()) std::abort();

    // Feed sizes from 1 byte up, picked by the input's length.
    if (!same(asTheGateway(bytes, 1 + size % 61), asBeast(bytes))) __builtin_trap();
    return 0;
}
