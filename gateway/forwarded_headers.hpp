// Which header fields cross the gateway. Hop-by-hop fields (RFC 9110 7.6.1)
// and those a Connection field names belong to one connection and are dropped
// in both directions; dpgate sets its own framing on each side.
#pragma once

#include "gateway/net.hpp"

#include <string_view>

namespace dpgate::gateway {

class HeadFields;

bool isHopByHop(std::string_view name);

// Appends `from`'s fields as "Name: value\r\n" lines to a serialized head
// (both directions write raw buffers), skipping hop-by-hop fields, the
// fields `from`'s Connection header names, and any name in `also_drop`.
void appendEndToEndFields(const HeadFields& from, std::string& head,
                          std::initializer_list<std::string_view> also_drop = {});

}  // namespace dpgate::gateway
