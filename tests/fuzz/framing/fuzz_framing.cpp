// libFuzzer over a client request, head and body, as the client session
// reads it: dpgate's ClientRequestParser (client_request.hpp), fed in
// pieces, against Beast's own request_parser on the whole input.
// - Any bytes: a verdict, never a crash; a refusal has a status of 400, 413
//   or 431 and a message.
// - What dpgate accepts, Beast accepts, and reads the same way: request
//   line, head fields, keep-alive, body, and where the request ends.
// - What dpgate refuses as malformed (against HTTP/1.1's grammar), Beast
//   refuses too. Refusals of well-formed shapes (smuggling shapes, limits)
//   are dpgate's own and not compared.
// - A body dropped unread (discardBody) ends at the same byte as one kept.
// - The head scans' fast path finds what their byte loops find.
#include "gateway/http/client_request.hpp"
#include "gateway/http/http_grammar.hpp"

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

using FieldList = std::vector<std::pair<std::string, std::string>>;

struct Parsed {
    bool failed = false;
    std::string method, target;
    unsigned version = 0;
    bool keep_alive = false;
    FieldList fields;  // the head's, not a trailer's
    std::string body;
    size_t used = 0;  // where the request ends in the input
};

// Beast's fields keep a repeated name's values together; the gateway's keep
// wire order. Compared grouped by name, each name's values in order.
FieldList grouped(FieldList f) {
    auto lower = [](std::string s) {
        for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::stable_sort(f.begin(), f.end(), [&](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
    return f;
}

constexpr size_t kBodyLimit = 1 << 20;

// The gateway's parser, `feed` bytes at a time, as reads would hand them over;
// with `discard`, the body is read through and dropped (a request answered
// from its head).
Parsed asTheGateway(std::string_view wire, size_t feed, RequestRefusal& refusal, bool discard = false) {
    // Header limits below Beast's (8 KiB): past them the gateway refuses first.
    ClientRequestParser parser(RequestLimits{4096, 16, kBodyLimit});
    Parsed out;
    std::string pending;
    for (size_t at = 0; at < wire.size() && !parser.is_done() && !parser.failed();) {
        const size_t n = std::min(feed, wire.size() - at);
        pending.append(wire.substr(at, n));
        at += n;
        // A put() that completes the head stops there (the session judges
        // the head first): the body goes in the next.
        while (true) {
            const bool head_done = parser.is_header_done();
            if (head_done && discard) parser.discardBody();
            const size_t used = parser.put(pending);
            if (used > pending.size()) std::abort();
            out.used += used;
            pending.erase(0, used);
            if (head_done || !parser.is_header_done() || parser.is_done() || parser.failed()) break;
        }
    }
    if (parser.failed()) {
        refusal = parser.refusal();
        if (refusal.status != 400 && refusal.status != 413 && refusal.status != 431) std::abort();
        if (refusal.message.empty()) std::abort();
    }
    if (!parser.is_done()) {
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
    parser.body_limit(kBodyLimit);
    Parsed out;
    error_code ec;
    // The head first (eager off), so its fields are read before a trailer's join them.
    size_t used = parser.put(net::buffer(wire.data(), wire.size()), ec);
    if (!ec && parser.is_header_done()) {
        for (const auto& f : parser.get()) out.fields.emplace_back(f.name_string(), f.value());
        parser.eager(true);
        while (!ec && !parser.is_done() && used < wire.size()) {
            const size_t n = parser.put(net::buffer(wire.data() + used, wire.size() - used), ec);
            used += n;
            if (n == 0) break;
        }
    }
    if (ec == http::error::need_more) ec = {};
    if (ec || !parser.is_done()) {
        out.failed = true;
        return out;
    }
    const auto& request = parser.get();
    out.method = request.method_string();
    out.target = request.target();
    out.version = request.version();
    out.keep_alive = parser.keep_alive();
    out.body = request.body();
    out.used = used;
    return out;
}

// The head parsers' SSE2 scans (http_grammar_sse2.hpp) stop where the byte
// loops stop: the head's end and a bare LF in the input, and each run from
// each of the first bytes, in a copy that ends with the CR they rely on.
void compareScans(std::string_view wire) {
    bool bare_fast = false, bare_plain = false;
    if (grammar::findHeadEnd(wire, bare_fast, true) != grammar::findHeadEnd(wire, bare_plain, false) ||
        bare_fast != bare_plain)
        __builtin_trap();
    const std::string bytes = std::string(wire) + '\r';
    const char* end = bytes.data() + bytes.size();
    for (size_t from = 0; from < std::min<size_t>(bytes.size(), 64); ++from) {
        const char* p = bytes.data() + from;
        if (grammar::skipRun<grammar::kTarget>(p, end, true) != grammar::skipRun<grammar::kTarget>(p, end, false) ||
            grammar::skipRun<grammar::kValue>(p, end, true) != grammar::skipRun<grammar::kValue>(p, end, false) ||
            grammar::skipToken(p, end, true) != grammar::skipToken(p, end, false))
            __builtin_trap();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view wire(reinterpret_cast<const char*>(data), size);
    compareScans(wire);
    RequestRefusal refusal;
    // Feed sizes from 1 byte up, picked by the input's length.
    const Parsed gateway = asTheGateway(wire, 1 + size % 61, refusal);
    const Parsed beast = asBeast(wire);
    if (!gateway.failed) {
        const bool same = !beast.failed && gateway.method == beast.method && gateway.target == beast.target &&
                          gateway.version == beast.version && gateway.keep_alive == beast.keep_alive &&
                          grouped(gateway.fields) == grouped(beast.fields) && gateway.body == beast.body &&
                          gateway.used == beast.used;
        if (!same) __builtin_trap();
        // Dropped, the body still ends where it ends, and nothing of it is kept.
        RequestRefusal discard_refusal;
        const Parsed discarded = asTheGateway(wire, 1 + size % 61, discard_refusal, true);
        if (discarded.failed || discarded.used != gateway.used || !discarded.body.empty()) __builtin_trap();
    } else if (refusal.malformed && !beast.failed) {
        __builtin_trap();
    }
    return 0;
}
