#pragma once
// The RFC 8259 rules JsonValidator and the request readers apply byte by
// byte: one spelling of what a number, a literal and an escape are.
#include <cstddef>
#include <cstring>
#include <string_view>

namespace dpgate::admission::json_grammar {

inline bool isSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
inline bool isDigit(char c) { return c >= '0' && c <= '9'; }

// The value of the four hex digits at p, or -1.
inline long hex4(const char* p, const char* end) {
    if (end - p < 4) return -1;
    long value = 0;
    for (int i = 0; i < 4; ++i) {
        const char c = p[i];
        int digit = -1;
        if (c >= '0' && c <= '9') digit = c - '0';
        if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
        if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
        if (digit < 0) return -1;
        value = value * 16 + digit;
    }
    return value;
}

// The escape at p (a backslash before `end`): past it, or null with `what` set.
inline const char* escapeEnd(const char* p, const char* end, const char*& what) {
    if (end - p < 2) {
        what = "malformed JSON (unclosed string)";
        return nullptr;
    }
    switch (p[1]) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't': return p + 2;
        case 'u': break;
        default: what = "invalid string (a bad escape)"; return nullptr;
    }
    const long unit = hex4(p + 2, end);
    if (unit < 0) {
        what = "invalid string (a bad escape: \\u needs four hex digits)";
        return nullptr;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) {
        what = "invalid string (a lone surrogate escape: \\udc00-\\udfff without \\ud800-\\udbff before it)";
        return nullptr;
    }
    if (unit < 0xd800 || unit > 0xdbff) return p + 6;
    const long low = end - p >= 8 && p[6] == '\\' && p[7] == 'u' ? hex4(p + 8, end) : -1;
    if (low < 0xdc00 || low > 0xdfff) {
        what = "invalid string (a lone surrogate escape: \\ud800-\\udbff must be followed by \\udc00-\\udfff)";
        return nullptr;
    }
    return p + 12;
}

// True when every backslash in a string's content [p, end) starts a valid
// escape; the content is known to hold no quote or control character.
inline bool escapesValid(const char* p, const char* end) {
    const char* what = "";
    while (p < end) {
        p = static_cast<const char*>(std::memchr(p, '\\', static_cast<std::size_t>(end - p)));
        if (p == nullptr) return true;
        p = escapeEnd(p, end, what);
        if (p == nullptr) return false;
    }
    return true;
}

// Past the number at p, or null. What follows it is the caller's business.
inline const char* numberEnd(const char* p, const char* end) {
    if (p < end && *p == '-') ++p;
    if (p == end || !isDigit(*p)) return nullptr;
    if (*p == '0') {
        ++p;
    } else {
        while (p < end && isDigit(*p)) ++p;
    }
    if (p < end && *p == '.') {
        ++p;
        if (p == end || !isDigit(*p)) return nullptr;
        while (p < end && isDigit(*p)) ++p;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        ++p;
        if (p < end && (*p == '+' || *p == '-')) ++p;
        if (p == end || !isDigit(*p)) return nullptr;
        while (p < end && isDigit(*p)) ++p;
    }
    return p;
}

// "true", "false" or "null" for a value starting with t, f or n.
inline std::string_view literalFor(char first) { return first == 't' ? "true" : first == 'f' ? "false" : "null"; }

}  // namespace dpgate::admission::json_grammar
