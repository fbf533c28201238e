// Parses the bytes a buffer already holds, without a read operation.
//
// A small request or answer arrives with its body in the same segment as its
// header: once the header is parsed, the body is already in the buffer, and
// Beast's http::async_read_some would still go through a composed operation
// and a posted completion to hand it over. This is the synchronous half of
// that operation: callers read only when it made no progress.
#pragma once

#include "gateway/net/net.hpp"

namespace dpgate::gateway {

// Feeds `buffer` to `parser` until the message is done, the buffer is empty,
// or the parser needs more input or (buffer_body) a new output buffer; those
// two are not errors. Consumed bytes leave the buffer.
template <class Parser>
error_code parseBuffered(Parser& parser, beast::flat_buffer& buffer) {
    error_code ec;
    while (buffer.size() != 0 && !parser.is_done()) {
        const size_t used = parser.put(buffer.data(), ec);
        buffer.consume(used);
        if (ec == http::error::need_more || ec == http::error::need_buffer) return {};
        if (ec || used == 0) return ec;
    }
    return ec;
}

}  // namespace dpgate::gateway
