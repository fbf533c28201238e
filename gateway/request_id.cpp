#include "gateway/request_id.hpp"

#include <algorithm>

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
    static constexpr char kHex[] = "0123456789abcdef";
    id.assign(32, '0');
    for (int half = 0; half < 2; ++half) {
        std::uint64_t bits = ids.next();
        for (int i = 0; i < 16; ++i) id[size_t(half * 16 + i)] = kHex[(bits >> (i * 4)) & 0xf];
    }
}

}  // namespace dpgate::gateway
