#include "gateway/http/upstream_response_parser.hpp"

#include "gateway/http/http_grammar.hpp"

#include <algorithm>
#include <cstring>

namespace dpgate::gateway {

using namespace grammar;

size_t UpstreamResponseParser::put(net::const_buffer buffer, error_code& ec) {
    ec = {};
    const std::string_view bytes(static_cast<const char*>(buffer.data()), buffer.size());
    if (!bytes.empty()) got_some_ = true;
    size_t used = 0;
    while (state_ != State::done) {
        const std::string_view rest = bytes.substr(used);
        size_t n = 0;
        switch (state_) {
            case State::head: n = putHead(rest, ec); break;
            case State::body:
            case State::body_to_eof:
            case State::chunk_data: {
                if (rest.empty()) break;
                if (window_.data == nullptr || window_.size == 0) {
                    ec = http::error::need_buffer;
                    return used;
                }
                n = std::min(rest.size(), window_.size);
                if (state_ != State::body_to_eof) {
                    n = size_t(std::min<uint64_t>(n, remaining_));
                } else if (n > body_left_) {
                    ec = http::error::body_limit;
                    return used;
                } else {
                    body_left_ -= n;
                }
                std::memcpy(window_.data, rest.data(), n);
                window_.data += n;
                window_.size -= n;
                if (state_ != State::body_to_eof && (remaining_ -= n) == 0)
                    state_ = state_ == State::body ? State::done : State::chunk_end;
                break;
            }
            case State::chunk_end:
                // The CRLF after a chunk's data.
                if (!rest.empty() && rest[0] != '\r') {
                    ec = http::error::bad_chunk;
                } else if (rest.size() >= 2) {
                    if (rest[1] != '\n') {
                        ec = http::error::bad_chunk;
                    } else {
                        n = 2;
                        state_ = State::chunk_size;
                    }
                }
                break;
            case State::chunk_size: n = putChunkSize(rest, ec); break;
            case State::trailer: n = putTrailer(rest, ec); break;
            case State::done: break;
        }
        if (ec) return used;
        used += n;
        if (n == 0 && state_ != State::done) {
            ec = http::error::need_more;
            return used;
        }
    }
    return used;
}

void UpstreamResponseParser::put_eof(error_code& ec) {
    ec = {};
    if (state_ == State::head || ((has_content_length_ || chunked_) && state_ != State::done)) {
        ec = http::error::partial_message;
        return;
    }
    state_ = State::done;
}

// The bytes offered again start where they did before: a search for the
// end of a head or trailer goes on where it stopped, 3 bytes back for a
// blank line cut in two. From the start each time, a head that comes a few
// bytes a read would cost its length squared.
size_t UpstreamResponseParser::resumeAt(std::string_view bytes) const {
    size_t from = std::min(scanned_, bytes.size());
    from = from > 3 ? from - 3 : 0;
    // An LF there had its CR before it (findHeadEnd judged it): start at the
    // CR, or the LF would be judged bare.
    if (from > 0 && bytes[from] == '\n') --from;
    return from;
}

size_t UpstreamResponseParser::putHead(std::string_view bytes, error_code& ec) {
    const size_t from = resumeAt(bytes);
    bool bare_lf = false;
    const size_t found = findHeadEnd(bytes.substr(from), bare_lf);
    if (bare_lf) {
        ec = http::error::bad_line_ending;
        return 0;
    }
    const size_t end = found == 0 ? 0 : from + found;
    scanned_ = end == 0 ? bytes.size() : 0;
    const size_t room = kMaxHeadBytes - interim_head_bytes_;
    if (end == 0 ? bytes.size() > room : end > room) {
        refuse(http::error::header_limit, ec);
        return 0;
    }
    if (end == 0) return 0;
    parseHead(bytes.substr(0, end), ec);
    if (ec) return 0;
    if (state_ == State::head) interim_head_bytes_ += end;  // an interim head: the final one follows
    return end;
}

void UpstreamResponseParser::forgetHead() {
    // The fields stay until the next head replaces them (HeadFields::assign).
    status_ = 0;
    http11_ = true;
    close_ = keep_alive_field_ = false;
    has_content_length_ = chunked_ = false;
    content_length_ = 0;
}

void UpstreamResponseParser::parseHead(std::string_view wire, error_code& ec) {
    // As the client's request (client_request.cpp): parsed in the copy kept,
    // every view an offset into it, every scan stopped by a CR before the end.
    fields_.assign(wire);
    const char* const begin = fields_.slice(0, uint32_t(wire.size())).data();
    const char* const end = begin + wire.size();
    const char* p = begin;

    // status-line = HTTP-version SP 3DIGIT SP reason-phrase CRLF
    const std::string_view version(p, std::min<size_t>(9, wire.size()));
    if (version != "HTTP/1.1 " && version != "HTTP/1.0 ") {
        ec = http::error::bad_version;
        return;
    }
    http11_ = p[7] == '1';
    p += 9;
    if (wire.size() < 13 || !std::all_of(p, p + 3, [](char c) { return c >= '0' && c <= '9'; }) || p[3] != ' ') {
        ec = http::error::bad_status;
        return;
    }
    status_ = unsigned(p[0] - '0') * 100 + unsigned(p[1] - '0') * 10 + unsigned(p[2] - '0');
    p += 4;
    p = skipRun<kValue>(p, end);
    if (p[0] != '\r' || p[1] != '\n') {
        ec = *p == '\r' ? http::error::bad_line_ending : http::error::bad_reason;
        return;
    }
    p += 2;

    auto at = [&](const char* q) { return uint32_t(q - begin); };
    while (*p != '\r') {
        std::string_view name, value;
        if (!readFieldLine(p, end, name, value, ec)) return;
        const http::field id = fieldId(name);
        fields_.addAt(id, at(name.data()), uint32_t(name.size()), at(value.data()), uint32_t(value.size()));
        if (!readFramingField(id, value, ec)) return;
    }
    if (p[1] != '\n') {
        ec = http::error::bad_line_ending;
        return;
    }

    // RFC 9112 6.3, as Beast: no body after 1xx, 204 and 304 whatever the head says.
    if (status_ == 101) {
        // A protocol switch: what follows is not HTTP, and nobody asked for it.
        refuse(http::error::bad_status, ec);
    } else if (status_ / 100 == 1) {
        forgetHead();  // an interim answer: the final one comes next
    } else if (status_ == 204 || status_ == 304) {
        state_ = State::done;
    } else if (has_content_length_) {
        if (content_length_ > body_left_) {
            ec = http::error::body_limit;
            return;
        }
        remaining_ = content_length_;
        state_ = content_length_ > 0 ? State::body : State::done;
    } else if (chunked_) {
        state_ = State::chunk_size;
    } else {
        need_eof_ = true;
        state_ = State::body_to_eof;
    }
}

// One field line at p, in the head or in a trailer; false with ec set when
// malformed or refused. Obsolete line folding is refused wherever it shows:
// a line that starts blank, or a value that goes on in the next line, which
// is refused before this line's piece of it is judged (Beast joins the
// lines first, so judging the piece would fail what Beast reads).
bool UpstreamResponseParser::readFieldLine(const char*& p, const char* end, std::string_view& name,
                                           std::string_view& value, error_code& ec) {
    if (isBlank(*p)) {
        refuse(http::error::bad_value, ec);
        return false;
    }
    if (readField(p, end, name, value)) {
        ec = http::error::bad_field;
        return false;
    }
    if (isBlank(*p)) {
        refuse(http::error::bad_value, ec);
        return false;
    }
    return true;
}

// The fields that decide framing and the connection, in the head or in a
// trailer (Beast reads both the same way). False with ec set when refused.
bool UpstreamResponseParser::readFramingField(http::field id, std::string_view value, error_code& ec) {
    switch (id) {
        case http::field::connection:
        case http::field::proxy_connection:
            if (!forEachToken(value, [&](std::string_view token) {
                    close_ = close_ || iequals(token, "close");
                    keep_alive_field_ = keep_alive_field_ || iequals(token, "keep-alive");
                })) {
                ec = http::error::bad_value;
                return false;
            }
            return true;
        case http::field::content_length: {
            uint64_t length = 0;
            if (chunked_ || readContentLength(value, length)) {
                ec = http::error::bad_content_length;
                return false;
            }
            if (has_content_length_ && length != content_length_) {
                ec = http::error::multiple_content_length;
                return false;
            }
            has_content_length_ = true;
            content_length_ = length;
            return true;
        }
        case http::field::transfer_encoding:
            if (chunked_ || has_content_length_) {
                ec = http::error::bad_transfer_encoding;
                return false;
            }
            if (!iequals(trim(value), "chunked")) {
                refuse(http::error::bad_transfer_encoding, ec);
                return false;
            }
            chunked_ = true;
            return true;
        default: return true;
    }
}

size_t UpstreamResponseParser::putChunkSize(std::string_view bytes, error_code& ec) {
    const void* cr = std::memchr(bytes.data(), '\r', std::min(bytes.size(), kMaxChunkLineBytes));
    if (cr == nullptr) {
        if (bytes.size() >= kMaxChunkLineBytes) refuse(http::error::bad_chunk_extension, ec);
        return 0;
    }
    const size_t line_bytes = size_t(static_cast<const char*>(cr) - bytes.data());
    if (line_bytes + 1 >= bytes.size()) return 0;
    if (bytes[line_bytes + 1] != '\n') {
        ec = http::error::bad_line_ending;
        return 0;
    }
    uint64_t size = 0;
    switch (readChunkSize(bytes.substr(0, line_bytes), size)) {
        case ChunkLine::ok: break;
        case ChunkLine::malformed: ec = http::error::bad_chunk; return 0;
        case ChunkLine::refused: refuse(http::error::bad_chunk_extension, ec); return 0;
    }
    if (size == 0) {
        state_ = State::trailer;
    } else {
        if (size > body_left_) {
            ec = http::error::body_limit;
            return 0;
        }
        body_left_ -= size;
        remaining_ = size;
        state_ = State::chunk_data;
    }
    return line_bytes + 2;
}

size_t UpstreamResponseParser::putTrailer(std::string_view bytes, error_code& ec) {
    // trailer-part CRLF. Its fields join the head's, as in Beast (the relay
    // has sent the head by then; they are kept for whoever reads them).
    if (bytes.size() < 2) return 0;
    if (bytes[0] == '\r') {
        if (bytes[1] != '\n') {
            ec = http::error::bad_line_ending;
            return 0;
        }
        state_ = State::done;
        return 2;
    }
    const std::string_view window = bytes.substr(0, kMaxHeadBytes);
    const size_t end = window.find("\r\n\r\n", resumeAt(window));
    if (end == std::string_view::npos) {
        scanned_ = window.size();
        if (window.size() == kMaxHeadBytes) refuse(http::error::header_limit, ec);
        return 0;
    }
    scanned_ = 0;
    const char* p = bytes.data();
    const char* const last = p + end + 2;  // the blank line
    while (p != last) {
        if (*p == '\r') {
            ec = http::error::bad_line_ending;
            return 0;
        }
        std::string_view name, value;
        if (!readFieldLine(p, bytes.data() + bytes.size(), name, value, ec)) return 0;
        const http::field id = fieldId(name);
        if (!readFramingField(id, value, ec)) return 0;
        fields_.add(id, name, value);
    }
    state_ = State::done;
    return end + 4;
}

}  // namespace dpgate::gateway
