// The encodings of etcd's v3 JSON gateway: keys and values in base64, int64
// fields as decimal strings, a prefix as a [key, range_end) range. Pure (no
// sockets), so the fuzz build links it (tests/fuzz/control/).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpgate::gateway::control {

std::string base64Encode(std::string_view bytes);
// nullopt for anything that is not standard base64 (padding required).
std::optional<std::string> base64Decode(std::string_view text);

// The smallest key above every key that starts with `prefix`.
std::string prefixEnd(std::string_view prefix);

struct Kv {
    std::string key;
    std::string value;
    int64_t mod_revision = 0;
    int64_t create_revision = 0;
    int64_t lease = 0;
};

// A "kv" object of the gateway's JSON; nullopt when malformed.
std::optional<Kv> readKv(const nlohmann::json& kv);
int64_t readInt64(const nlohmann::json& object, const char* key);  // int64 fields come as strings

}  // namespace dpgate::gateway::control
