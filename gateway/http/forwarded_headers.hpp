// Which header fields cross the gateway. Hop-by-hop fields (RFC 9110 7.6.1)
// and those a Connection field names belong to one connection and are dropped
// in both directions; dpgate sets its own framing on each side.
#pragma once

#include "gateway/net/net.hpp"

#include <boost/container/small_vector.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace dpgate::gateway {

class HeadFields;

bool isHopByHop(std::string_view name);

// A set of field names, looked up once: a field matches by Beast's field
// code when the name has one (every field of a parsed message carries its
// code), by a case-insensitive compare otherwise. Built once per call site
// (a static), so dropping them costs no string compare per field, and a
// known field is one bit test.
class FieldNames {
public:
    FieldNames(std::initializer_list<std::string_view> names);

    bool contains(http::field id, std::string_view name) const {
        if (id != http::field::unknown) return (ids_[size_t(id) / 64] >> (size_t(id) % 64)) & 1;
        return containsUnknown(name);
    }

private:
    bool containsUnknown(std::string_view name) const;

    static constexpr size_t kIdWords = 6;  // a bit for each of Beast's field codes
    static_assert(size_t(http::field::xref) < 64 * kIdWords, "xref is Beast's last field code");
    std::array<uint64_t, kIdWords> ids_{};
    boost::container::small_vector<std::string_view, 4> unknown_;  // names without a code
};

// Appends `from`'s fields as "Name: value\r\n" lines to a serialized head
// (both directions write raw buffers), skipping hop-by-hop fields, the
// fields `from`'s Connection header names, and any name in `also_drop`.
void appendEndToEndFields(const HeadFields& from, std::string& head, const FieldNames& also_drop = {});

}  // namespace dpgate::gateway
