// A client's request as the gateway keeps it, and the parser that reads it.
//
// The parser is dpgate's own, in one pass over the head (Beast's grammar,
// then a second pass for the framing checks, cost ~13 % of a proxied
// request's instructions). It takes HTTP/1.1's grammar as Beast's
// request parser does — fuzz_framing checks that whatever it accepts, Beast
// accepts the same way — and refuses besides the shapes request smuggling
// relies on, which Beast lets through:
// - a bare LF line ending, obsolete line folding, whitespace before a colon;
// - Content-Length beside Transfer-Encoding, differing or malformed lengths;
// - any transfer coding but a lone chunked, and chunked on HTTP/1.0;
// - more than one Host;
// - framing fields (Content-Length, Transfer-Encoding, Connection) in a
//   chunked body's trailer. Other trailer fields are read and dropped: a
//   backend never sees them, and they never stand in for a header field.
// Heads over the header-byte or field-count limit are refused with 431 and
// declared bodies over the body limit with 413, from the head alone.
//
// put() stops where the head ends: the caller judges the head (who is
// calling, where to, how much they may) before the parser takes a body byte,
// and a body that is not wanted is never stored (discardBody()).
//
// The body takes its bytes from the process's BodyBudget before they are
// read: the Content-Length when the body starts, a chunk's size at its size
// line; beyond the budget the request is refused with 503. It is one
// std::string that grows with what arrives (a client that announces 200 MB
// and sends one byte holds 1 MiB, not 200 MB): up to 1 MiB at once, then the
// declared length once half a MiB of it is in (so a real upload still lands
// in one buffer, copied at most once). It always keeps kPaddingBytes of
// capacity past the end, which admission's scan (simdjson) reads without a
// copy.
#pragma once

#include "admission/request_scan.hpp"
#include "gateway/http/body_budget.hpp"
#include "gateway/http/head_fields.hpp"
#include "gateway/net/net.hpp"
#include "gateway/platform/string_pool.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace dpgate::gateway {

class ClientRequest {
public:
    ClientRequest() = default;
    ClientRequest(ClientRequest&&) noexcept = default;
    ClientRequest& operator=(ClientRequest&&) noexcept = default;
    ~ClientRequest() { StringPool::give(std::move(body_)); }

    http::verb method() const { return method_; }
    std::string_view method_string() const { return fields_.slice(method_at_, method_bytes_); }
    std::string_view target() const { return fields_.slice(target_at_, target_bytes_); }
    unsigned version() const { return version_; }
    // HTTP/1.1 unless "Connection: close", HTTP/1.0 only with
    // "Connection: keep-alive" (Proxy-Connection counts too, as in Beast).
    bool keep_alive() const { return keep_alive_; }

    const HeadFields& fields() const { return fields_; }
    std::string_view operator[](http::field name) const { return fields_[name]; }
    std::string_view operator[](std::string_view name) const { return fields_[name]; }

    std::string& body() { return body_; }
    const std::string& body() const { return body_; }

private:
    friend class ClientRequestParser;

    http::verb method_ = http::verb::unknown;
    uint32_t method_at_ = 0, method_bytes_ = 0, target_at_ = 0, target_bytes_ = 0;
    unsigned version_ = 11;
    bool keep_alive_ = true;
    HeadFields fields_;  // also holds the request line's bytes
    std::string body_;
    BodyBudget::Share body_share_;  // the body's bytes in the process's budget, given back with it
};

struct RequestLimits {
    uint64_t max_header_bytes = 64 * 1024;
    uint32_t max_header_count = 100;
    uint64_t max_body_bytes = UINT64_MAX;
    // Where the body's bytes are held against max_buffered_body_bytes (null: nowhere).
    BodyBudget* body_budget = nullptr;
    uint64_t max_buffered_body_bytes = UINT64_MAX;
};

// Why a request was refused: the status (400, 413, 431, or 503 beyond the
// body budget) and what was wrong, for the error body.
struct RequestRefusal {
    unsigned status = 0;
    std::string message;
    // True when the bytes break HTTP/1.1's grammar (Beast refuses them too);
    // false for a well-formed shape refused on purpose: the smuggling shapes
    // and the limits above.
    bool malformed = false;
};

class ClientRequestParser {
public:
    static constexpr std::size_t kFirstReserveBytes = 1 << 20;
    static constexpr std::size_t kPaddingBytes = admission::kScanPaddingBytes;
    // A chunk-size line, or a chunked body's trailer, longer than this is refused.
    static constexpr std::size_t kMaxChunkLineBytes = 4096;

    explicit ClientRequestParser(const RequestLimits& limits = {}) : limits_(limits) {}

    // Takes what it can of `bytes` (the start of what the client sent that is
    // not yet used) and returns how many it used. Nothing is used until the
    // head is whole, and a call that completes the head stops there; after
    // that, body bytes as they come, never past the end of this request. The
    // first call after the head takes the body's share of the budget, even
    // with no bytes. On a refusal failed() turns true and nothing more is
    // used.
    size_t put(std::string_view bytes);

    // From now on body bytes are read through and dropped, and take nothing
    // from the budget: the body of a request answered from its head.
    void discardBody() { discard_ = true; }

    bool is_header_done() const { return state_ > State::head; }
    bool is_done() const { return state_ == State::done; }
    bool failed() const { return state_ == State::failed; }
    const RequestRefusal& refusal() const { return refusal_; }

    // Once the head is done.
    const HeadFields& fields() const { return request_.fields_; }
    bool chunked() const { return chunked_; }
    // The declared Content-Length (0 when absent or chunked).
    uint64_t content_length() const { return declared_; }

    // The request so far: its head once is_header_done(), its body as it
    // arrives. The caller may hold it while the parser goes on reading the body.
    const ClientRequest& get() const { return request_; }
    ClientRequest& request() { return request_; }
    // The request, once is_done(); the parser is spent.
    ClientRequest release() { return std::move(request_); }

private:
    enum class State { head, body, chunk_size, chunk_data, chunk_end, trailer, done, failed };

    size_t fail(unsigned status, std::string message, bool malformed);
    size_t putHead(std::string_view bytes);
    void parseHead(std::string_view head);
    // The Content-Length body's share of the budget and first reservation.
    void startBody();
    bool takeBudget(uint64_t bytes);
    size_t putChunkSize(std::string_view bytes);
    size_t putTrailer(std::string_view bytes);
    void appendBody(std::string_view bytes);

    RequestLimits limits_;
    State state_ = State::head;
    RequestRefusal refusal_;
    ClientRequest request_;
    bool chunked_ = false;
    bool body_started_ = false;
    bool discard_ = false;
    uint64_t declared_ = 0;   // Content-Length, 0 when chunked or absent
    uint64_t remaining_ = 0;  // of the Content-Length body or the current chunk
    uint64_t received_ = 0;   // body bytes so far, kept or dropped
};

}  // namespace dpgate::gateway
