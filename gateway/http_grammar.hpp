// HTTP/1.1's grammar for the two head parsers (client_request.cpp,
// upstream_response_parser.cpp): what a byte may be where, field lines,
// lists and lengths, read as Beast's parser reads them (the fuzz targets
// compare both parsers with Beast's).
#pragma once

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace dpgate::gateway::grammar {

enum CharClass : uint8_t {
    kToken = 1,   // tchar: a method, a field name, a chunk extension
    kTarget = 2,  // a request-target byte: visible ASCII and obs-text
    kValue = 4,   // a field value or reason phrase byte: the above, SP and HTAB
};

inline constexpr std::array<uint8_t, 256> kClasses = [] {
    std::array<uint8_t, 256> classes{};
    for (int c = 0x21; c <= 0xff; ++c)
        if (c != 0x7f) classes[size_t(c)] = kTarget | kValue;
    classes[' '] = kValue;
    classes['\t'] = kValue;
    for (int c = '0'; c <= '9'; ++c) classes[size_t(c)] |= kToken;
    for (int c = 'a'; c <= 'z'; ++c) classes[size_t(c)] |= kToken;
    for (int c = 'A'; c <= 'Z'; ++c) classes[size_t(c)] |= kToken;
    for (char c : std::string_view("!#$%&'*+-.^_`|~")) classes[static_cast<unsigned char>(c)] |= kToken;
    return classes;
}();

inline bool is(char c, CharClass kind) { return (kClasses[static_cast<unsigned char>(c)] & kind) != 0; }

inline bool isBlank(char c) { return c == ' ' || c == '\t'; }

inline std::string_view trim(std::string_view s) {
    while (!s.empty() && isBlank(s.front())) s.remove_prefix(1);
    while (!s.empty() && isBlank(s.back())) s.remove_suffix(1);
    return s;
}

inline bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           boost::beast::iequals(boost::beast::string_view(a.data(), a.size()), boost::beast::string_view(b));
}

// `name` (token characters) equals `lower` (lower-case letters and '-') in
// any case. Exact for tokens: OR-ing 0x20 maps only 'A'-'Z' onto 'a'-'z',
// and only CR (not a token character) onto '-'.
inline bool isName(std::string_view name, std::string_view lower) {
    if (name.size() != lower.size()) return false;
    for (size_t i = 0; i < name.size(); ++i)
        if (char(name[i] | 0x20) != lower[i]) return false;
    return true;
}

// Beast's code for a field name. The names nearly every request and answer
// carry are told apart by length and one compare; Beast's table (a hash and
// a case-insensitive compare, a few cache lines) is left for the rest.
inline boost::beast::http::field fieldId(std::string_view name) {
    using boost::beast::http::field;
    switch (name.size()) {
        case 4:
            if (isName(name, "host")) return field::host;
            if (isName(name, "date")) return field::date;
            break;
        case 6:
            if (isName(name, "accept")) return field::accept;
            if (isName(name, "server")) return field::server;
            break;
        case 10:
            if (isName(name, "connection")) return field::connection;
            if (isName(name, "user-agent")) return field::user_agent;
            if (isName(name, "keep-alive")) return field::keep_alive;
            break;
        case 12:
            if (isName(name, "content-type")) return field::content_type;
            break;
        case 13:
            if (isName(name, "authorization")) return field::authorization;
            break;
        case 14:
            if (isName(name, "content-length")) return field::content_length;
            break;
        case 17:
            if (isName(name, "transfer-encoding")) return field::transfer_encoding;
            break;
        default: break;
    }
    return boost::beast::http::string_to_field(boost::beast::string_view(name.data(), name.size()));
}

// Where the head ends in `bytes` (just past its blank line), or 0 when it
// has not ended yet. Sets `bare_lf` on a LF without its CR before the end,
// so a peer cannot park a head that will never be judged.
inline size_t findHeadEnd(std::string_view bytes, bool& bare_lf) {
    const char* const begin = bytes.data();
    for (size_t from = 0; from < bytes.size();) {
        const void* lf = std::memchr(begin + from, '\n', bytes.size() - from);
        if (lf == nullptr) return 0;
        const size_t i = size_t(static_cast<const char*>(lf) - begin);
        if (i == 0 || begin[i - 1] != '\r') {
            bare_lf = true;  // RFC 9112 lets a recipient refuse it, and smugglers rely on it
            return 0;
        }
        if (i >= 3 && begin[i - 2] == '\n' && begin[i - 3] == '\r') return i + 1;
        from = i + 1;
    }
    return 0;
}

// A Connection value: a comma-separated list of tokens, empty elements
// allowed (Beast's opt_token_list). Calls on_token for each; false when the
// list is malformed.
template <class OnToken>
bool forEachToken(std::string_view value, OnToken&& on_token) {
    size_t i = 0;
    bool need_comma = false;
    while (true) {
        while (i < value.size() && isBlank(value[i])) ++i;
        if (i == value.size()) return true;
        if (value[i] == ',') {
            need_comma = false;
            ++i;
            continue;
        }
        if (need_comma || !is(value[i], kToken)) return false;
        const size_t start = i;
        while (i < value.size() && is(value[i], kToken)) ++i;
        on_token(value.substr(start, i - start));
        need_comma = true;
    }
}

// The value of one Content-Length field: one or more equal decimal lengths
// separated by commas (RFC 9112 6.3 lets a recipient take "5, 5" as 5), each
// within 64 bits. Returns the error, or null with `length` set.
inline const char* readContentLength(std::string_view value, uint64_t& length) {
    if (value.empty()) return "empty Content-Length.";
    bool first = true;
    while (true) {
        const size_t comma = value.find(',');
        const std::string_view item = trim(value.substr(0, comma));
        if (item.empty()) return "invalid Content-Length.";
        uint64_t v = 0;
        for (char c : item) {
            const uint64_t digit = uint64_t(c - '0');
            if (c < '0' || c > '9' || v > (UINT64_MAX - digit) / 10) return "invalid Content-Length.";
            v = v * 10 + digit;
        }
        if (!first && v != length) return "conflicting Content-Length values.";
        length = v;
        first = false;
        if (comma == std::string_view::npos) return nullptr;
        value.remove_prefix(comma + 1);
    }
}

// One field line at `p` (a name, a colon, the value, CRLF) in a buffer that
// holds a CR later on; the caller has checked it does not begin with CR or
// whitespace. Sets name and value (trimmed) and moves p past the CRLF;
// returns the error, or null.
inline const char* readField(const char*& p, std::string_view& name, std::string_view& value) {
    const char* const name_start = p;
    while (is(*p, kToken)) ++p;
    if (*p != ':' || p == name_start)
        return p != name_start && isBlank(*p)
                   ? "malformed header field name (whitespace before the colon is not accepted)."
                   : "malformed header field.";
    name = {name_start, size_t(p - name_start)};
    ++p;
    while (isBlank(*p)) ++p;
    const char* const value_start = p;
    while (is(*p, kValue)) ++p;
    if (p[0] != '\r' || p[1] != '\n') return "malformed header field value.";
    const char* value_end = p;
    while (value_end != value_start && isBlank(value_end[-1])) --value_end;
    value = {value_start, size_t(value_end - value_start)};
    p += 2;
    return nullptr;
}

// A chunk-size line without its CRLF: chunk-size [ chunk-ext ], where
// chunk-ext = *( ";" name [ "=" value ] ) with name and value tokens — what
// peers send, a subset of Beast's grammar (no whitespace, no quoted values).
enum class ChunkLine { ok, malformed, refused };
inline ChunkLine readChunkSize(std::string_view line, uint64_t& size) {
    size_t i = 0;
    size = 0;
    for (; i < line.size(); ++i) {
        const char c = line[i];
        const int digit = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (digit < 0) break;
        size = size * 16 + uint64_t(digit);
    }
    if (i == 0) return ChunkLine::malformed;
    if (i > 16) return ChunkLine::refused;  // 16 hex digits hold any 64-bit size
    bool extensions_ok = true;
    while (extensions_ok && i < line.size()) {
        extensions_ok = line[i] == ';';
        const size_t name = ++i;
        while (i < line.size() && is(line[i], kToken)) ++i;
        extensions_ok = extensions_ok && i > name;
        if (extensions_ok && i < line.size() && line[i] == '=') {
            const size_t value = ++i;
            while (i < line.size() && is(line[i], kToken)) ++i;
            extensions_ok = i > value;
        }
    }
    return extensions_ok ? ChunkLine::ok : ChunkLine::refused;
}

}  // namespace dpgate::gateway::grammar
