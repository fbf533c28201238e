#include "conf/auth_key_reader.hpp"

#include "conf/sha256_hex.hpp"

#include <algorithm>

namespace dpgate::conf::detail {

void checkKeyName(const Field& at, const std::string& name) {
    const bool valid = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '@' || c == '-';
    });
    if (!valid) fail(at, "key name must be 1-64 characters of [A-Za-z0-9._@-]");
}

void readKeyLimits(const MappingReader& entry, AuthKey& key) {
    if (auto f = entry.get("max_concurrent")) key.max_concurrent = static_cast<uint32_t>(readUint(*f, 0, 1'000'000));
    if (auto f = entry.get("requests_per_min"))
        key.requests_per_min = static_cast<uint32_t>(readUint(*f, 0, 1'000'000'000));
    if (auto f = entry.get("requests_per_day"))
        key.requests_per_day = static_cast<uint32_t>(readUint(*f, 0, 4'000'000'000));
    // A trillion tokens a minute is beyond any machine; the bound keeps the
    // bucket arithmetic (tokens x 60,000 units) inside 64 bits.
    if (auto f = entry.get("tokens_per_min")) key.tokens_per_min = readUint(*f, 0, 1'000'000'000'000);
    if (auto f = entry.get("tokens_per_day")) key.tokens_per_day = readUint(*f, 0, 1'000'000'000'000'000);
}

AuthKey readAuthKey(const MappingReader& entry, std::string name, bool allow_plain_key, const AuthKey& defaults) {
    AuthKey key = defaults;
    key.sha256.clear();
    key.trusted = false;
    key.name = std::move(name);
    const std::optional<Field> sha256 = entry.get("sha256");
    const std::optional<Field> plain = allow_plain_key ? entry.get("key") : std::nullopt;
    if (sha256 && plain) fail(*plain, "give either sha256 or key, not both");
    if (sha256) {
        const std::optional<std::string> hex = normalizeSha256Hex(readString(*sha256));
        if (!hex) fail(*sha256, "expected 64 hex digits (the SHA-256 of the key)");
        key.sha256 = *hex;
    } else if (plain) {
        const std::string value = readString(*plain);
        if (value.empty()) fail(*plain, "must not be empty");
        key.sha256 = sha256Hex(value);
    } else {
        fail(entry.self(), allow_plain_key ? "missing sha256 (or, in demo configs, key)" : "missing sha256");
    }
    if (auto f = entry.get("trusted")) key.trusted = readBool(*f);
    readKeyLimits(entry, key);
    if (auto f = entry.get("metrics")) key.metrics = readBool(*f);
    return key;
}

}  // namespace dpgate::conf::detail
