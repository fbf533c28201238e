// Shared by inline auth.keys entries and the keys file.
#pragma once

#include "conf/config.hpp"
#include "conf/yaml_reader.hpp"

#include <string>

namespace dpgate::conf::detail {

// A key's name labels metrics and logs: keep it to [A-Za-z0-9._@-], 1..64 chars.
void checkKeyName(const Field& at, const std::string& name);

// Reads sha256, trusted, max_concurrent, requests_per_min, metrics, and, when
// allow_plain_key, a demo `key:` that is stored as its hash. Exactly one of
// sha256 / key must be present.
AuthKey readAuthKey(const MappingReader& entry, std::string name, bool allow_plain_key);

}  // namespace dpgate::conf::detail
