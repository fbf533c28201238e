#include "gateway/request_framing.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace dpgate::gateway {
namespace {

char lowerAscii(char c) { return (c >= 'A' && c <= 'Z') ? char(c + 32) : c; }

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lowerAscii(x) == lowerAscii(y); });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// RFC 9110 token characters: what a field name may contain.
constexpr std::array<bool, 256> kTokenChar = [] {
    std::array<bool, 256> token{};
    for (int c = '0'; c <= '9'; ++c) token[size_t(c)] = true;
    for (int c = 'a'; c <= 'z'; ++c) token[size_t(c)] = true;
    for (int c = 'A'; c <= 'Z'; ++c) token[size_t(c)] = true;
    for (char c : std::string_view("!#$%&'*+-.^_`|~")) token[static_cast<unsigned char>(c)] = true;
    return token;
}();

bool isToken(std::string_view name) {
    for (char c : name)
        if (!kTokenChar[static_cast<unsigned char>(c)]) return false;
    return true;
}

// The first "\r\n" at or after `from`, or npos.
size_t findCrlf(std::string_view s, size_t from) {
    while (from < s.size()) {
        const void* cr = std::memchr(s.data() + from, '\r', s.size() - from);
        if (cr == nullptr) return std::string_view::npos;
        const size_t i = size_t(static_cast<const char*>(cr) - s.data());
        if (i + 1 < s.size() && s[i + 1] == '\n') return i;
        from = i + 1;
    }
    return std::string_view::npos;
}

// Calls on_item(item) for each trimmed, non-empty element of a
// comma-separated field value.
template <typename OnItem>
void forEachListItem(std::string_view value, OnItem&& on_item) {
    while (true) {
        size_t comma = value.find(',');
        std::string_view item = trim(value.substr(0, comma));
        if (!item.empty()) on_item(item);
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
}

bool allDigits(std::string_view s) {
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

FramingVerdict bad(std::string message) { return {400, std::move(message)}; }

}  // namespace

size_t findHeaderEnd(std::string_view bytes, bool& bad_bytes) {
    bad_bytes = false;
    const char* const begin = bytes.data();
    size_t from = 0;
    while (from < bytes.size()) {
        const void* lf = std::memchr(begin + from, '\n', bytes.size() - from);
        if (lf == nullptr) return 0;
        const size_t i = size_t(static_cast<const char*>(lf) - begin);
        if (i == 0 || begin[i - 1] != '\r') {
            bad_bytes = true;  // bare LF: RFC 9112 lets us reject, and smugglers rely on it
            return 0;
        }
        if (i >= 3 && begin[i - 2] == '\n' && begin[i - 3] == '\r') return i + 1;
        from = i + 1;
    }
    return 0;
}

FramingVerdict checkRequestFraming(std::string_view head, const FramingLimits& limits) {
    if (head.size() > limits.max_header_bytes)
        return {431, "request header is " + std::to_string(head.size()) + " bytes; the limit is " +
                         std::to_string(limits.max_header_bytes) + "."};

    size_t eol = findCrlf(head, 0);
    if (eol == std::string_view::npos) return bad("request line is not terminated by CRLF.");
    std::string_view request_line = head.substr(0, eol);
    size_t last_space = request_line.rfind(' ');
    if (last_space == std::string_view::npos) return bad("malformed request line.");
    std::string_view version = request_line.substr(last_space + 1);
    bool http10 = version == "HTTP/1.0";
    if (!http10 && version != "HTTP/1.1") return bad("only HTTP/1.0 and HTTP/1.1 are served.");

    // Content-Length elements, checked in order once the header is read:
    // the first invalid or conflicting one names the error.
    size_t content_lengths = 0;
    std::string_view first_content_length;
    const char* content_length_error = nullptr;
    size_t transfer_codings = 0;
    std::string_view last_transfer_coding;
    bool has_transfer_encoding = false;
    int host_fields = 0;
    uint32_t field_count = 0;

    size_t pos = eol + 2;
    while (pos < head.size()) {
        size_t end = findCrlf(head, pos);
        if (end == std::string_view::npos) return bad("header line is not terminated by CRLF.");
        std::string_view line = head.substr(pos, end - pos);
        pos = end + 2;
        if (line.empty()) break;  // the blank line ending the header
        if (line.front() == ' ' || line.front() == '\t')
            return bad("obsolete line folding (obs-fold) in the request header is not accepted.");
        if (++field_count > limits.max_header_count)
            return {431, "request has more than " + std::to_string(limits.max_header_count) + " header fields."};
        size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) return bad("malformed header field.");
        std::string_view name = line.substr(0, colon);
        if (!isToken(name)) return bad("malformed header field name (whitespace before the colon is not accepted).");
        // Only three names matter here; their lengths tell them apart first.
        if (name.size() != 14 && name.size() != 17 && name.size() != 4) continue;
        std::string_view value = trim(line.substr(colon + 1));
        if (iequals(name, "content-length")) {
            forEachListItem(value, [&](std::string_view cl) {
                if (content_lengths++ == 0) first_content_length = cl;
                if (content_length_error != nullptr) return;
                if (cl.size() > 19 || !allDigits(cl)) {
                    content_length_error = "invalid Content-Length.";
                } else if (cl != first_content_length) {
                    content_length_error = "conflicting Content-Length values.";
                }
            });
            if (value.empty()) return bad("empty Content-Length.");
        } else if (iequals(name, "transfer-encoding")) {
            has_transfer_encoding = true;
            forEachListItem(value, [&](std::string_view coding) {
                ++transfer_codings;
                last_transfer_coding = coding;
            });
        } else if (iequals(name, "host")) {
            ++host_fields;
        }
    }

    if (host_fields > 1) return bad("more than one Host header field.");
    if (content_length_error != nullptr) return bad(content_length_error);
    FramingVerdict verdict;
    if (content_lengths != 0) {
        verdict.has_content_length = true;
        for (char c : first_content_length) verdict.content_length = verdict.content_length * 10 + uint64_t(c - '0');
    }
    if (has_transfer_encoding) {
        if (content_lengths != 0) return bad("both Content-Length and Transfer-Encoding are present.");
        if (http10) return bad("Transfer-Encoding on an HTTP/1.0 request is not accepted.");
        if (transfer_codings == 0 || !iequals(last_transfer_coding, "chunked"))
            return bad("Transfer-Encoding must end in chunked.");
        if (transfer_codings != 1) return bad("only the chunked transfer coding is accepted.");
    }
    return verdict;
}

}  // namespace dpgate::gateway
