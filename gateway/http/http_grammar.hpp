// HTTP/1.1's grammar for the two head parsers (client_request.cpp,
// upstream_response_parser.cpp): what a byte may be where, field lines,
// lists and lengths, read as Beast's parser reads them (the fuzz targets
// compare both parsers with Beast's).
#pragma once

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>

#include "common/fast_paths.hpp"
#include "gateway/http/http_grammar_sse2.hpp"
#include "routing/hash64.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
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

// `name` (token characters) equals `lower` (lower-case letters, digits and
// '-') in any case. Exact for tokens: OR-ing 0x20 maps only 'A'-'Z' onto
// 'a'-'z', and only CR (not a token character) onto '-'. Compared a word at
// a time, with routing's loads: eight bytes (the last eight overlapping the
// ones before), or the two overlapping halves of a four- to seven-byte name.
inline bool isName(std::string_view name, std::string_view lower) {
    using routing::hash_detail::load64;
    using routing::hash_detail::loadShort;
    const size_t n = name.size();
    if (n != lower.size()) return false;
    const auto* const a = reinterpret_cast<const unsigned char*>(name.data());
    const auto* const b = reinterpret_cast<const unsigned char*>(lower.data());
    constexpr uint64_t kFold = 0x2020202020202020u;
    if (n >= 8) {
        for (size_t at = 0; at + 8 < n; at += 8)
            if ((load64(a + at) | kFold) != load64(b + at)) return false;
        return (load64(a + n - 8) | kFold) == load64(b + n - 8);
    }
    if (n >= 4) return (loadShort(a, n) | kFold) == loadShort(b, n);
    for (size_t i = 0; i < n; ++i)
        if ((a[i] | 0x20) != b[i]) return false;
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
// so a peer cannot park a head that will never be judged. The LFs are
// judged in order, found sixteen bytes at a time with `sse2`
// (http_grammar_sse2.hpp), else byte by byte.
inline size_t findHeadEnd(std::string_view bytes, bool& bare_lf, bool sse2 = fastPathOn(FastPath::http_grammar_sse2)) {
    const char* const begin = bytes.data();
    const size_t size = bytes.size();
    // The LF at i: 1 when it ends the head, -1 when it is bare, 0 otherwise.
    auto judge = [&](size_t i) {
        if (i == 0 || begin[i - 1] != '\r') {
            bare_lf = true;  // RFC 9112 lets a recipient refuse it, and smugglers rely on it
            return -1;
        }
        return i >= 3 && begin[i - 2] == '\n' && begin[i - 3] == '\r' ? 1 : 0;
    };
    size_t from = 0;
    if (sse2) {
        if (const std::optional<size_t> end = judgeLfsSse2(begin, size, from, judge)) return *end;
    }
    for (; from < size; ++from) {
        if (begin[from] != '\n') continue;
        if (const int verdict = judge(from)) return verdict > 0 ? from + 1 : 0;
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

// Past the run of `kind` bytes (kTarget or kValue) that starts at p, in a
// buffer that holds a byte outside the run (a CR) before `end`. With `sse2`
// sixteen bytes are judged at once while they lie before `end`
// (http_grammar_sse2.hpp): a request target or a value of a few dozen bytes
// costs a few instructions, not a few per byte.
template <CharClass kind>
const char* skipRun(const char* p, const char* end, bool sse2 = fastPathOn(FastPath::http_grammar_sse2)) {
    static_assert(kind == kTarget || kind == kValue);
    if (sse2) p = skipRunSse2<kind == kValue>(p, end);
    while (is(*p, kind)) ++p;
    return p;
}

// Past the run of token characters (a field name) that starts at p, in a
// buffer that holds a byte outside the run before `end`. With `sse2`
// sixteen bytes are judged at once while they lie before `end`, by the
// letters, digits and '-' nearly every name is made of
// (http_grammar_sse2.hpp); from the first other byte on, byte by byte,
// which takes the rest of tchar.
inline const char* skipToken(const char* p, const char* end, bool sse2 = fastPathOn(FastPath::http_grammar_sse2)) {
    if (sse2) p = skipTokenSse2(p, end);
    while (is(*p, kToken)) ++p;
    return p;
}

// One field line at `p` (a name, a colon, the value, CRLF) in a buffer that
// holds a CR later on, before `end`; the caller has checked it does not begin with CR or
// whitespace. Sets name and value (trimmed) and moves p past the CRLF;
// returns the error, or null.
inline const char* readField(const char*& p, const char* end, std::string_view& name, std::string_view& value) {
    const char* const name_start = p;
    p = skipToken(p, end);
    if (*p != ':' || p == name_start)
        return p != name_start && isBlank(*p)
                   ? "malformed header field name (whitespace before the colon is not accepted)."
                   : "malformed header field.";
    name = {name_start, size_t(p - name_start)};
    ++p;
    while (isBlank(*p)) ++p;
    const char* const value_start = p;
    p = skipRun<kValue>(p, end);
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
