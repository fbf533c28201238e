// The relay's answer parser (UpstreamResponseParser) and Beast's own
// response parser, run on the same bytes: what each makes of them. Shared by
// fuzz_upstream_response and the unit test upstream_response_parser_test.
#pragma once

#include "gateway/http/parse_buffered.hpp"
#include "gateway/http/upstream_response_parser.hpp"

#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dpgate::gateway::test {

struct ParsedAnswer {
    bool failed = false;
    bool refused = false;  // the relay's parser refused a well-formed answer (UpstreamResponseParser::refused)
    unsigned status = 0;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    bool keep_alive = false;
};

// Beast's fields keep a repeated name's values together (a later one goes
// after the earlier ones); the relay's parser keeps wire order. Compared
// grouped by name, each name's values in order.
inline std::vector<std::pair<std::string, std::string>> grouped(std::vector<std::pair<std::string, std::string>> f) {
    auto lower = [](std::string s) {
        for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::stable_sort(f.begin(), f.end(), [&](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
    return f;
}

// As pumpAnswer reads: `wire` arrives in pieces of at most `feed`
// bytes, and the body goes through windows of at most `window` bytes.
inline ParsedAnswer parseAsTheRelay(std::string_view wire, size_t feed, size_t window) {
    UpstreamResponseParser parser;
    parser.body_limit(1 << 20);
    beast::flat_buffer buffer;
    std::vector<char> room(window);
    ParsedAnswer out;
    size_t fed = 0;
    while (!parser.is_done()) {
        // Until the header is parsed there is no window: parsing stops after
        // the header with the body bytes left in the buffer.
        const bool window_set = parser.is_header_done();
        if (window_set) {
            parser.body().data = room.data();
            parser.body().size = room.size();
        }
        error_code ec = parseBuffered(parser, buffer);
        if (ec) {
            out.failed = true;
            out.refused = parser.refused();
            return out;
        }
        if (window_set) out.body.append(room.data(), room.size() - parser.body().size);
        if (parser.is_done() || (!window_set && parser.is_header_done())) continue;
        if (window_set && parser.body().size == 0) continue;  // a window filled: the next one
        if (fed == wire.size()) {
            // As Beast's reads do: nothing at all is end_of_stream.
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
    parser.fields().each(
        [&](http::field, std::string_view name, std::string_view value) { out.fields.emplace_back(name, value); });
    out.keep_alive = parser.keep_alive();
    return out;
}

// Beast's response parser over the whole of `wire` at once. Beast's parser
// ends an answer at an interim (1xx) head; the relay's reads past them, so
// here each interim answer is parsed whole by Beast and dropped, and a fresh
// parser takes what follows it.
inline ParsedAnswer parseWithBeast(std::string_view wire) {
    std::optional<http::response_parser<http::string_body>> interim;
    while (true) {
        interim.emplace();
        interim->header_limit(1 << 20);
        interim->eager(true);
        error_code ec;
        const size_t used = interim->put(net::buffer(wire.data(), wire.size()), ec);
        if (ec || !interim->is_done()) break;
        const unsigned status = interim->get().result_int();
        if (status / 100 != 1 || status == 101) break;
        wire.remove_prefix(used);
    }
    http::response_parser<http::string_body> parser;
    parser.header_limit(1 << 20);  // beyond the relay's: its own limit decides
    parser.body_limit(1 << 20);
    parser.eager(true);
    error_code ec;
    ParsedAnswer out;
    parser.put(net::buffer(wire.data(), wire.size()), ec);
    if (ec == http::error::need_more) ec = {};  // all of the input was used: its end decides
    if (!ec && !parser.is_done()) {
        if (parser.got_some()) parser.put_eof(ec);
        else ec = http::error::end_of_stream;
    }
    if (ec) {
        out.failed = true;
        return out;
    }
    out.status = parser.get().result_int();
    for (const auto& f : parser.get()) out.fields.emplace_back(f.name_string(), f.value());
    out.body = parser.get().body();
    out.keep_alive = parser.keep_alive();
    return out;
}

// The same verdict, and when both parsed it the same answer; an answer the
// relay's parser refuses on purpose is not compared.
inline bool sameAnswer(const ParsedAnswer& relay, const ParsedAnswer& beast) {
    if (relay.refused) return true;
    if (relay.failed || beast.failed) return relay.failed == beast.failed;
    return relay.status == beast.status && grouped(relay.fields) == grouped(beast.fields) && relay.body == beast.body &&
           relay.keep_alive == beast.keep_alive;
}

}  // namespace dpgate::gateway::test
