// Which header fields cross the gateway. Hop-by-hop fields (RFC 9110 7.6.1)
// and those a Connection field names belong to one connection and are dropped
// in both directions; dpgate sets its own framing on each side.
#pragma once

#include "gateway/net.hpp"

#include <string_view>

namespace dpgate::gateway {

class UpstreamResponseParser;

bool isHopByHop(std::string_view name);

// Copies `from`'s fields into `to`, skipping hop-by-hop fields, the fields
// `from`'s Connection header names, and any name in `also_drop`.
void copyEndToEndFields(const http::fields& from, http::fields& to,
                        std::initializer_list<std::string_view> also_drop = {});

// The same selection, appended as "Name: value\r\n" lines to a serialized
// head (the upstream request is written as raw buffers).
void appendEndToEndFields(const http::fields& from, std::string& head,
                          std::initializer_list<std::string_view> also_drop = {});
void appendEndToEndFields(const UpstreamResponseParser& from, std::string& head,
                          std::initializer_list<std::string_view> also_drop = {});

}  // namespace dpgate::gateway
