// Shared by inline auth.keys entries and the keys file.
#pragma once

#include "conf/config.hpp"
#include "conf/yaml_reader.hpp"

#include <string>

namespace dpgate::conf::detail {

// A key's name labels metrics and logs: keep it to [A-Za-z0-9._@-], 1..64 chars.
void checkKeyName(const Field& at, const std::string& name);

// Reads the limit and budget fields a key and limits.key_defaults share
// (max_concurrent, requests_per_min/day, tokens_per_min/day) that `entry`
// has into `key`, leaving the others as they are.
void readKeyLimits(const MappingReader& entry, AuthKey& key);

// Reads sha256, trusted, metrics, the limits and budgets (those not given are
// `defaults`'), and, when allow_plain_key, a demo `key:` that is stored as
// its hash. Exactly one of sha256 / key must be present.
AuthKey readAuthKey(const MappingReader& entry, std::string name, bool allow_plain_key, const AuthKey& defaults = {});

}  // namespace dpgate::conf::detail
