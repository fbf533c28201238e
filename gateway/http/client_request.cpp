#include "gateway/http/client_request.hpp"

#include "gateway/http/http_grammar.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace dpgate::gateway {
namespace {

using namespace grammar;

// Why a Transfer-Encoding value other than a lone "chunked" is refused.
const char* transferEncodingError(std::string_view value) {
    std::string_view last;
    size_t codings = 0;
    for (size_t from = 0; from <= value.size();) {
        const size_t comma = std::min(value.find(',', from), value.size());
        if (std::string_view item = trim(value.substr(from, comma - from)); !item.empty()) {
            last = item;
            ++codings;
        }
        from = comma + 1;
    }
    if (codings == 0 || !iequals(last, "chunked")) return "Transfer-Encoding must end in chunked.";
    return "only the chunked transfer coding is accepted.";
}

}  // namespace

size_t ClientRequestParser::fail(unsigned status, std::string message, bool malformed) {
    state_ = State::failed;
    refusal_ = {status, std::move(message), malformed};
    return 0;
}

size_t ClientRequestParser::put(std::string_view bytes) {
    if (state_ == State::head) {
        // A call that completes the head stops there: the caller judges it first.
        return putHead(bytes);
    }
    if (!body_started_) {
        body_started_ = true;
        if (state_ == State::body) startBody();
    }
    size_t used = 0;
    while (true) {
        const std::string_view rest = bytes.substr(used);
        size_t n = 0;
        switch (state_) {
            case State::head: return used;
            case State::body:
            case State::chunk_data:
                n = size_t(std::min<uint64_t>(remaining_, rest.size()));
                appendBody(rest.substr(0, n));
                remaining_ -= n;
                if (remaining_ == 0) state_ = state_ == State::body ? State::done : State::chunk_end;
                break;
            case State::chunk_end:
                if (rest.size() >= 2 || (!rest.empty() && rest[0] != '\r')) {
                    if (rest[0] != '\r' || rest[1] != '\n')
                        return used + fail(400, "malformed chunked body: a chunk's data does not end in CRLF.", true);
                    n = 2;
                    state_ = State::chunk_size;
                }
                break;
            case State::chunk_size: n = putChunkSize(rest); break;
            case State::trailer: n = putTrailer(rest); break;
            case State::done:
            case State::failed: return used;
        }
        // Nothing used: more bytes are needed, or the request was refused.
        if (n == 0 && state_ != State::done) return used;
        used += n;
        if (state_ == State::done) return used;
    }
}

size_t ClientRequestParser::putHead(std::string_view bytes) {
    bool bare_lf = false;
    const size_t end = findHeadEnd(bytes, bare_lf);
    if (bare_lf) return fail(400, "malformed request header: bare LF line ending.", true);
    if (end == 0 ? bytes.size() > limits_.max_header_bytes : end > limits_.max_header_bytes)
        return fail(431, "request header exceeds " + std::to_string(limits_.max_header_bytes) + " bytes.", false);
    if (end == 0) return 0;
    parseHead(bytes.substr(0, end));
    return state_ == State::failed ? 0 : end;
}

void ClientRequestParser::parseHead(std::string_view wire) {
    // Parsed in the copy the request keeps, so every view below is an offset
    // into it. The head ends in CRLF CRLF (findHeadEnd), so every scan below
    // stops at a CR before the end without a bounds check.
    HeadFields& fields = request_.fields_;
    fields.assign(wire);
    const char* const begin = fields.slice(0, uint32_t(wire.size())).data();
    const char* const end = begin + wire.size();
    const char* p = begin;
    auto at = [&](const char* q) { return uint32_t(q - begin); };

    // request-line = method SP request-target SP HTTP-version CRLF
    while (is(*p, kToken)) ++p;
    if (p == begin || *p != ' ') return void(fail(400, "malformed request line.", true));
    request_.method_bytes_ = at(p);
    const char* const target = ++p;
    p = skipRun<kTarget>(p, end);
    if (p == target || *p != ' ') return void(fail(400, "malformed request line.", true));
    request_.target_at_ = at(target);
    request_.target_bytes_ = uint32_t(p - target);
    ++p;
    const std::string_view version(p, std::min<size_t>(10, wire.size() - at(p)));
    if (version != "HTTP/1.1\r\n" && version != "HTTP/1.0\r\n")
        return void(fail(400, "only HTTP/1.0 and HTTP/1.1 are served.", true));
    const bool http10 = p[7] == '0';
    request_.version_ = http10 ? 10 : 11;
    request_.method_ = http::string_to_verb(request_.method_string());
    p += version.size();

    uint32_t field_count = 0;
    int hosts = 0;
    bool has_content_length = false, has_transfer_encoding = false, close = false, keep_alive = false;
    const char* framing_error = nullptr;  // reported after the head is read, as the first one found
    while (*p != '\r') {
        if (isBlank(*p))
            return void(fail(400, "obsolete line folding (obs-fold) in the request header is not accepted.", false));
        if (++field_count > limits_.max_header_count)
            return void(fail(
                431, "request has more than " + std::to_string(limits_.max_header_count) + " header fields.", false));
        std::string_view name, value;
        if (const char* error = readField(p, end, name, value)) return void(fail(400, error, true));
        const http::field id = fieldId(name);
        fields.addAt(id, at(name.data()), uint32_t(name.size()), at(value.data()), uint32_t(value.size()));
        switch (id) {
            case http::field::content_length: {
                uint64_t length = 0;
                const char* error = readContentLength(value, length);
                if (!error && has_content_length && length != declared_) error = "conflicting Content-Length values.";
                if (error && !framing_error) framing_error = error;
                has_content_length = true;
                declared_ = length;
                break;
            }
            case http::field::transfer_encoding:
                if (!framing_error && (has_transfer_encoding || !iequals(trim(value), "chunked")))
                    framing_error = has_transfer_encoding ? "only the chunked transfer coding is accepted."
                                                          : transferEncodingError(value);
                has_transfer_encoding = true;
                break;
            case http::field::host: ++hosts; break;
            case http::field::connection:
            case http::field::proxy_connection:
                if (!forEachToken(value, [&](std::string_view token) {
                        close = close || iequals(token, "close");
                        keep_alive = keep_alive || iequals(token, "keep-alive");
                    }))
                    return void(fail(400, "malformed Connection field.", true));
                break;
            default: break;
        }
    }
    if (p[1] != '\n') return void(fail(400, "malformed request header: a CR without its LF.", true));

    if (hosts > 1) return void(fail(400, "more than one Host header field.", false));
    if (framing_error) return void(fail(400, framing_error, false));
    if (has_transfer_encoding) {
        if (has_content_length) return void(fail(400, "both Content-Length and Transfer-Encoding are present.", false));
        if (http10) return void(fail(400, "Transfer-Encoding on an HTTP/1.0 request is not accepted.", false));
    }
    request_.keep_alive_ = http10 ? keep_alive : !close;

    if (has_transfer_encoding) {
        chunked_ = true;
        declared_ = 0;
        state_ = State::chunk_size;
    } else if (declared_ > limits_.max_body_bytes) {
        // Refused from the head alone, before a body byte is read.
        fail(413,
             "request body is " + std::to_string(declared_) + " bytes; the limit is " +
                 std::to_string(limits_.max_body_bytes) + " bytes.",
             false);
    } else if (declared_ > 0) {
        remaining_ = declared_;
        state_ = State::body;
    } else {
        state_ = State::done;
    }
}

void ClientRequestParser::startBody() {
    if (discard_) return;
    if (!takeBudget(declared_)) {
        fail(503,
             "dpgate holds as many request bodies at once as limits.max_buffered_body_bytes (" +
                 std::to_string(limits_.max_buffered_body_bytes) + " bytes) allows; this body of " +
                 std::to_string(declared_) + " bytes would go beyond it. Retry later.",
             false);
        return;
    }
    request_.body_ = StringPool::take();
    request_.body_.reserve(size_t(std::min<uint64_t>(declared_, kFirstReserveBytes)) + kPaddingBytes);
}

bool ClientRequestParser::takeBudget(uint64_t bytes) {
    return limits_.body_budget == nullptr ||
           limits_.body_budget->take(request_.body_share_, bytes, limits_.max_buffered_body_bytes);
}

size_t ClientRequestParser::putChunkSize(std::string_view bytes) {
    // chunk-size [ chunk-ext ] CRLF (grammar::readChunkSize).
    const void* cr = std::memchr(bytes.data(), '\r', std::min(bytes.size(), kMaxChunkLineBytes));
    if (cr == nullptr) {
        if (bytes.size() >= kMaxChunkLineBytes)
            return fail(400, "malformed chunked body: a chunk-size line over 4096 bytes.", false);
        return 0;
    }
    const size_t line_bytes = size_t(static_cast<const char*>(cr) - bytes.data());
    if (line_bytes + 1 >= bytes.size()) return 0;
    if (bytes[line_bytes + 1] != '\n') return fail(400, "malformed chunked body: a CR without its LF.", true);
    const std::string_view line = bytes.substr(0, line_bytes);

    uint64_t size = 0;
    switch (readChunkSize(line, size)) {
        case ChunkLine::ok: break;
        case ChunkLine::malformed: return fail(400, "malformed chunked body: a chunk without its size.", true);
        case ChunkLine::refused:
            return fail(400,
                        "malformed chunked body: a chunk size over 16 hex digits, or chunk extensions "
                        "other than ;name or ;name=token.",
                        false);
    }
    if (size == 0) {
        state_ = State::trailer;
    } else {
        if (size > limits_.max_body_bytes - std::min<uint64_t>(received_, limits_.max_body_bytes))
            return fail(413, "request body exceeds the limit of " + std::to_string(limits_.max_body_bytes) + " bytes.",
                        false);
        if (!discard_ && !takeBudget(size))
            return fail(503,
                        "dpgate holds as many request bodies at once as limits.max_buffered_body_bytes (" +
                            std::to_string(limits_.max_buffered_body_bytes) + " bytes) allows; this chunk of " +
                            std::to_string(size) + " bytes would go beyond it. Retry later.",
                        false);
        remaining_ = size;
        state_ = State::chunk_data;
    }
    return line_bytes + 2;
}

size_t ClientRequestParser::putTrailer(std::string_view bytes) {
    // trailer-part CRLF: fields read and dropped.
    if (bytes.size() < 2) return 0;
    if (bytes[0] == '\r') {
        if (bytes[1] != '\n') return fail(400, "malformed chunked body: a CR without its LF.", true);
        state_ = State::done;
        return 2;
    }
    const std::string_view window = bytes.substr(0, kMaxChunkLineBytes);
    const size_t end = window.find("\r\n\r\n");
    if (end == std::string_view::npos) {
        if (window.size() == kMaxChunkLineBytes)
            return fail(400, "malformed chunked body: a trailer over 4096 bytes.", false);
        return 0;
    }
    const char* p = bytes.data();
    const char* const last = p + end + 2;  // the blank line
    while (p != last) {
        if (*p == '\r') return fail(400, "malformed chunked body: a CR without its LF.", true);
        if (isBlank(*p)) return fail(400, "obsolete line folding (obs-fold) in the trailer is not accepted.", false);
        std::string_view name, value;
        if (const char* error = readField(p, bytes.data() + bytes.size(), name, value)) return fail(400, error, true);
        for (std::string_view framing : {"content-length", "transfer-encoding", "connection", "proxy-connection"})
            if (iequals(name, framing))
                return fail(400, "framing field " + std::string(name) + " in a trailer is not accepted.", false);
    }
    state_ = State::done;
    return end + 4;
}

void ClientRequestParser::appendBody(std::string_view bytes) {
    received_ += bytes.size();
    if (discard_) return;
    std::string& body = request_.body_;
    const std::size_t size = body.size();
    const std::size_t needed = size + bytes.size() + kPaddingBytes;
    if (declared_ > kFirstReserveBytes && size + bytes.size() >= kFirstReserveBytes / 2 &&
        body.capacity() < declared_ + kPaddingBytes)
        body.reserve(std::max<std::size_t>(std::size_t(declared_) + kPaddingBytes, needed));
    else if (body.capacity() < needed) body.reserve(std::max(needed, 2 * body.capacity()));
    body.append(bytes);
}

}  // namespace dpgate::gateway
