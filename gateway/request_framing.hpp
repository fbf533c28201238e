// Checks on a request's raw header bytes that Boost 1.81's parser does not
// make itself: request-smuggling shapes and header-count limits. Pure: bytes
// in, verdict out, so it is unit-tested and fuzzed without a socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dpgate::gateway {

struct FramingLimits {
    uint64_t max_header_bytes = 64 * 1024;
    uint32_t max_header_count = 100;
};

struct FramingVerdict {
    int status = 0;       // 0 = acceptable; else 400 or 431
    std::string message;  // what was wrong, for the error body
    bool has_content_length = false;
    uint64_t content_length = 0;  // when has_content_length: the (single) declared length
    bool ok() const { return status == 0; }
};

// Where the header ends in `bytes` (the offset just past the blank line), or
// 0 when it has not ended yet. Sets `bad` when the bytes can already be
// judged malformed (a bare LF), so a client cannot park an unjudgeable header.
size_t findHeaderEnd(std::string_view bytes, bool& bad);

// `head` is the request line and header fields up to and including the
// terminating CRLF CRLF.
FramingVerdict checkRequestFraming(std::string_view head, const FramingLimits& limits);

}  // namespace dpgate::gateway
