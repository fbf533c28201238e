// Who is calling: client API keys and the admin token, checked against the
// SHA-256 hashes the config holds. Pure: no sockets, no clocks; built once
// per loaded Config and then only read, so any thread may call it.
//
// The presented key is hashed once, then compared with every stored hash in
// constant time and without stopping at a match, so neither the position of
// a key in the file nor how much of a hash matched shows in the timing.
// A key that matched is remembered per thread (verified_key_cache.hpp) and
// its next request skips the hash; a reloaded store starts with none.
#pragma once

#include "conf/config.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::auth {

// What the gateway learns about an authenticated client. The name (never
// the key) labels metrics and logs.
struct KeyInfo {
    std::string name;
    // The first 12 hex digits of the key's SHA-256: tells keys apart in the
    // access log without revealing them.
    std::string hash_prefix;
    bool trusted = false;
    uint32_t max_concurrent = 0;    // 0 = unlimited
    uint32_t requests_per_min = 0;  // 0 = unlimited
    bool metrics = false;           // may read GET /metrics on the client port
    uint32_t requests_per_day = 0;  // the budgets (gateway/budget/), for refusals that name them
    uint64_t tokens_per_min = 0;
    uint64_t tokens_per_day = 0;

    bool budgeted() const { return requests_per_min || requests_per_day || tokens_per_min || tokens_per_day; }
    bool operator==(const KeyInfo&) const = default;
};

// The credentials of an `Authorization: Bearer <token>` value: the scheme is
// matched case-insensitively (RFC 9110 11.1), surrounding whitespace and
// extra spaces after the scheme are tolerated, and the token must be
// non-empty with no whitespace or control characters inside. nullopt for
// anything else (Basic, empty, "Bearer", "Bearer a b").
std::optional<std::string_view> bearerToken(std::string_view authorization);

class KeyStore {
public:
    // Reads admin.token_file once, here (its contents minus trailing CR/LF
    // are the token). Throws conf::ConfigError if that file cannot be read or is
    // empty, or if a stored hash is not 64 hex digits.
    KeyStore(const conf::AuthConfig& auth, const conf::AdminConfig& admin);

    // nullopt: no header, malformed header, or unknown key.
    std::optional<KeyInfo> authenticate(std::string_view authorization) const;

    // False when no admin token is configured. Client keys never pass here.
    bool authenticateAdmin(std::string_view authorization) const;

    // auth.required: when false the gateway may serve requests without an
    // Authorization header (a present but wrong key should still get 401).
    bool required() const { return required_; }
    bool hasAdminToken() const { return admin_digest_.has_value(); }
    std::size_t keyCount() const { return entries_.size(); }
    std::vector<std::string> keyNames() const;
    // How many verified keys this thread remembers for this store (tests).
    std::size_t verifiedOnThisThread() const;

private:
    using Digest = std::array<unsigned char, 32>;
    struct Entry {
        Digest digest;
        KeyInfo info;
    };

    bool required_;
    // Unique per store, never reused (unlike its address): tells a thread's
    // verified-key cache which store filled it.
    uint64_t generation_;
    std::vector<Entry> entries_;
    std::optional<Digest> admin_digest_;
};

}  // namespace dpgate::auth
