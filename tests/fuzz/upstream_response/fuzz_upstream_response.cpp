// Any bytes as a backend's answer: the relay's parser must never crash, and
// must say what Beast's response parser says (error or not; status, fields
// and body when not), however the bytes arrive and the body windows are cut.
// The first two input bytes pick the feed size and the window size.
#include "gateway/upstream_response_parser.hpp"

#include "gateway/parse_buffered.hpp"

#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace dpgate::gateway;

namespace {

// Beast's fields keep a repeated name's values together (a later one goes
// after the earlier ones); the relay's parser keeps wire order. Compared
// grouped by name, each name's values in order.
std::vector<std::pair<std::string, std::string>> grouped(std::vector<std::pair<std::string, std::string>> fields) {
    auto lower = [](std::string s) {
        for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::stable_sort(fields.begin(), fields.end(), [&](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
    return fields;
}

struct Parsed {
    bool failed = false;
    unsigned status = 0;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
};

Parsed relayParser(std::string_view wire, size_t feed, size_t window) {
    UpstreamResponseParser parser;
    parser.body_limit(1 << 20);
    beast::flat_buffer buffer;
    std::vector<char> room(window);
    Parsed out;
    size_t fed = 0;
    while (!parser.is_done()) {
        const bool window_set = parser.is_header_done();
        if (window_set) {
            parser.body().data = room.data();
            parser.body().size = room.size();
        }
        error_code ec = parseBuffered(parser, buffer);
        if (ec) {
            out.failed = true;
            return out;
        }
        if (window_set) out.body.append(room.data(), room.size() - parser.body().size);
        if (parser.is_done() || (!window_set && parser.is_header_done())) continue;
        if (window_set && parser.body().size == 0) continue;
        if (fed == wire.size()) {
            if (parser.got_some()) parser.put_eof(ec);
            else ec = http::error::end_of_stream;
            out.failed = bool(ec);
            break;
        }
        const size_t n = std::min(feed, wire.size() - fed);
        std::memcpy(buffer.prepare(n).data(), wire.data() + fed, n);
        buffer.commit(n);
        fed += n;
    }
    out.status = parser.status();
    for (size_t i = 0; i < parser.fieldCount(); ++i)
        out.fields.emplace_back(parser.nameOf(parser.field(i)), parser.valueOf(parser.field(i)));
    return out;
}

Parsed beastParser(std::string_view wire) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    parser.eager(true);
    error_code ec;
    Parsed out;
    parser.put(net::buffer(wire.data(), wire.size()), ec);
    if (ec == http::error::need_more) ec = {};  // all of the input was used: its end decides
    if (!ec && !parser.is_done()) {
        if (parser.got_some()) parser.put_eof(ec);  // as Beast's reads do: nothing at all is end_of_stream
        else ec = http::error::end_of_stream;
    }
    if (ec) {
        out.failed = true;
        return out;
    }
    out.status = parser.get().result_int();
    for (const auto& f : parser.get()) out.fields.emplace_back(f.name_string(), f.value());
    out.body = parser.get().body();
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const size_t feed = 1 + data[0] % 64;
    const size_t window = 1 + data[1] % 32;
    const std::string_view wire(reinterpret_cast<const char*>(data) + 2, size - 2);
    const Parsed got = relayParser(wire, feed, window);
    const Parsed expected = beastParser(wire);
    if (got.failed != expected.failed) __builtin_trap();
    if (!got.failed && (got.status != expected.status || grouped(got.fields) != grouped(expected.fields) || got.body != expected.body))
        __builtin_trap();
    return 0;
}
