#include "gateway/path/request_id.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace dpgate::gateway {

std::string requestIdFor(std::string_view client_value, RequestIdSource& ids) {
    std::string id;
    assignRequestId(id, client_value, ids);
    return id;
}

void assignRequestId(std::string& id, std::string_view client_value, RequestIdSource& ids) {
    bool usable = !client_value.empty() && client_value.size() <= 128 &&
                  std::all_of(client_value.begin(), client_value.end(),
                              [](char c) { return c > 0x20 && c < 0x7f && c != '"' && c != '\\'; });
    if (usable) return void(id.assign(client_value));
    // Two hex digits a byte, low nibble first, from a table of the 256 pairs.
    static constexpr std::array<std::array<char, 2>, 256> kPairs = [] {
        constexpr char kHex[] = "0123456789abcdef";
        std::array<std::array<char, 2>, 256> pairs{};
        for (size_t b = 0; b < 256; ++b) pairs[b] = {kHex[b & 0xf], kHex[b >> 4]};
        return pairs;
    }();
    id.resize(32);
    char* out = id.data();
    for (int half = 0; half < 2; ++half) {
        std::uint64_t bits = ids.next();
        for (int i = 0; i < 8; ++i, bits >>= 8, out += 2) std::memcpy(out, kPairs[bits & 0xff].data(), 2);
    }
}

}  // namespace dpgate::gateway
