#include "gateway/request_framing.hpp"

#include <algorithm>
#include <vector>

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
bool isTokenChar(char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Splits a comma-separated field value into trimmed, non-empty elements.
void splitList(std::string_view value, std::vector<std::string_view>& out) {
    while (true) {
        size_t comma = value.find(',');
        std::string_view item = trim(value.substr(0, comma));
        if (!item.empty()) out.push_back(item);
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
}

FramingVerdict bad(std::string message) { return {400, std::move(message)}; }

}  // namespace

size_t findHeaderEnd(std::string_view bytes, bool& bad_bytes) {
    bad_bytes = false;
    for (size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] != '\n') continue;
        if (i == 0 || bytes[i - 1] != '\r') {
            bad_bytes = true;  // bare LF: RFC 9112 lets us reject, and smugglers rely on it
            return 0;
        }
        if (i >= 3 && bytes[i - 2] == '\n' && bytes[i - 3] == '\r') return i + 1;
    }
    return 0;
}

FramingVerdict checkRequestFraming(std::string_view head, const FramingLimits& limits) {
    if (head.size() > limits.max_header_bytes)
        return {431, "request header is " + std::to_string(head.size()) + " bytes; the limit is " +
                         std::to_string(limits.max_header_bytes) + "."};

    size_t eol = head.find("\r\n");
    if (eol == std::string_view::npos) return bad("request line is not terminated by CRLF.");
    std::string_view request_line = head.substr(0, eol);
    size_t last_space = request_line.rfind(' ');
    if (last_space == std::string_view::npos) return bad("malformed request line.");
    std::string_view version = request_line.substr(last_space + 1);
    bool http10 = version == "HTTP/1.0";
    if (!http10 && version != "HTTP/1.1") return bad("only HTTP/1.0 and HTTP/1.1 are served.");

    std::vector<std::string_view> content_lengths;
    std::vector<std::string_view> transfer_codings;
    bool has_transfer_encoding = false;
    int host_fields = 0;
    uint32_t field_count = 0;

    size_t pos = eol + 2;
    while (pos < head.size()) {
        size_t end = head.find("\r\n", pos);
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
        if (!std::all_of(name.begin(), name.end(), isTokenChar))
            return bad("malformed header field name (whitespace before the colon is not accepted).");
        std::string_view value = trim(line.substr(colon + 1));
        if (iequals(name, "content-length")) {
            splitList(value, content_lengths);
            if (value.empty()) return bad("empty Content-Length.");
        } else if (iequals(name, "transfer-encoding")) {
            has_transfer_encoding = true;
            splitList(value, transfer_codings);
        } else if (iequals(name, "host")) {
            ++host_fields;
        }
    }

    if (host_fields > 1) return bad("more than one Host header field.");
    for (std::string_view cl : content_lengths) {
        if (cl.empty() || cl.size() > 19 ||
            !std::all_of(cl.begin(), cl.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return bad("invalid Content-Length.");
        if (cl != content_lengths.front()) return bad("conflicting Content-Length values.");
    }
    FramingVerdict verdict;
    if (!content_lengths.empty()) {
        verdict.has_content_length = true;
        for (char c : content_lengths.front()) verdict.content_length = verdict.content_length * 10 + uint64_t(c - '0');
    }
    if (has_transfer_encoding) {
        if (!content_lengths.empty()) return bad("both Content-Length and Transfer-Encoding are present.");
        if (http10) return bad("Transfer-Encoding on an HTTP/1.0 request is not accepted.");
        if (transfer_codings.empty() || !iequals(transfer_codings.back(), "chunked"))
            return bad("Transfer-Encoding must end in chunked.");
        if (transfer_codings.size() != 1) return bad("only the chunked transfer coding is accepted.");
    }
    return verdict;
}

}  // namespace dpgate::gateway
