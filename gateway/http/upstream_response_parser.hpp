// The parser of a backend's answer, dpgate's own (Beast's parser and field
// callbacks cost ~4k instructions of a ~43k-instruction request).
// It reads HTTP/1.1 as Beast's response parser does — the fuzz target
// fuzz_upstream_response and a unit test check it against Beast's on every
// input and cut — with the head copied once into a HeadFields, and the body
// written into a window the relay hands over piece by piece, as
// http::buffer_body does. Its interface is the part of Beast's basic_parser
// the relay uses, with Beast's error codes.
//
// Interim answers (1xx: 100 Continue, 102 Processing, 103 Early Hints, ...)
// are read and dropped, as HAProxy and nginx do: none has a body whatever
// its fields say (RFC 9112 6.3), and the answer is the final one after
// them, on the same connection. Beast's parser would stop at the first and
// call it the answer; the differential tests feed Beast what follows the
// interim heads instead (two_parsers.hpp).
//
// It refuses, where Beast would relay them, a few well-formed answers
// (refused() tells them apart from malformed ones): obsolete line folding,
// a transfer coding other than a lone chunked (dpgate re-frames the body and
// could not pass the coding on), chunk extensions other than ;name or
// ;name=token, a head or trailer over kMaxHeadBytes (the interim heads
// count into the final head's: a backend that sends 1xx heads forever
// reaches it), and 101 Switching Protocols, a switch dpgate never asks for.
#pragma once

#include "gateway/http/head_fields.hpp"
#include "gateway/net/net.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace dpgate::gateway {

class UpstreamResponseParser {
public:
    static constexpr size_t kMaxHeadBytes = 64 * 1024;
    static constexpr size_t kMaxChunkLineBytes = 4096;

    // Where body bytes go: `data` advances and `size` shrinks as they are
    // written; parsing stops with http::error::need_buffer when size is 0
    // (or data is null), and the relay hands over the next window.
    struct Window {
        char* data = nullptr;
        size_t size = 0;
    };

    UpstreamResponseParser() = default;

    // Takes what it can of `buffer` and returns how many bytes it used; ec
    // is need_more when it needs more input, need_buffer when it needs a
    // window, another http::error when the answer is refused.
    size_t put(net::const_buffer buffer, error_code& ec);
    // The connection closed: completes an answer whose body runs to the
    // close; partial_message if anything else was cut.
    void put_eof(error_code& ec);

    // No limit by default (the relay streams the body, never holds it).
    void body_limit(boost::optional<uint64_t> limit) { body_left_ = limit.value_or(UINT64_MAX); }

    // Any byte of an answer, interim heads included.
    bool got_some() const { return got_some_; }
    bool is_header_done() const { return state_ > State::head; }
    bool is_done() const { return state_ == State::done; }
    bool chunked() const { return chunked_; }
    bool need_eof() const { return need_eof_; }
    boost::optional<uint64_t> content_length() const {
        return has_content_length_ ? boost::optional<uint64_t>(content_length_) : boost::none;
    }
    // As Beast: HTTP/1.1 unless "Connection: close", HTTP/1.0 only with
    // "Connection: keep-alive", and never when the body runs to the close.
    bool keep_alive() const { return (http11_ ? !close_ : keep_alive_field_) && !need_eof_; }
    // After an error: true when dpgate refused a well-formed answer (above),
    // false when the answer was malformed.
    bool refused() const { return refused_; }

    unsigned status() const { return status_; }
    Window& body() { return window_; }

    const HeadFields& fields() const { return fields_; }
    // The first field of that name, or empty (HeadFields).
    std::string_view operator[](http::field name) const { return fields_[name]; }
    std::string_view operator[](std::string_view name) const { return fields_[name]; }
    bool has(http::field name) const { return fields_.has(name); }

private:
    enum class State { head, body, body_to_eof, chunk_size, chunk_data, chunk_end, trailer, done };

    size_t resumeAt(std::string_view bytes) const;
    size_t putHead(std::string_view bytes, error_code& ec);
    void parseHead(std::string_view head, error_code& ec);
    // After an interim head: what the next head decides starts afresh.
    void forgetHead();
    size_t putChunkSize(std::string_view bytes, error_code& ec);
    size_t putTrailer(std::string_view bytes, error_code& ec);
    bool readFieldLine(const char*& p, const char* end, std::string_view& name, std::string_view& value,
                       error_code& ec);
    bool readFramingField(http::field id, std::string_view value, error_code& ec);
    void refuse(http::error error, error_code& ec) {
        refused_ = true;
        ec = error;
    }

    State state_ = State::head;
    unsigned status_ = 0;
    bool got_some_ = false;
    bool http11_ = true;
    bool close_ = false, keep_alive_field_ = false;
    bool has_content_length_ = false, chunked_ = false, need_eof_ = false;
    bool refused_ = false;
    uint64_t content_length_ = 0;
    uint64_t remaining_ = 0;  // of the Content-Length body or the current chunk
    uint64_t body_left_ = UINT64_MAX;
    size_t interim_head_bytes_ = 0;  // of the 1xx heads passed over, charged to kMaxHeadBytes
    size_t scanned_ = 0;             // of the head or trailer offered so far, searched for its end
    HeadFields fields_;
    Window window_;
};

}  // namespace dpgate::gateway
