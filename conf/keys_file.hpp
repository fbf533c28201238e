// The client API keys file named by auth.keys_file. Only hashes, never keys:
//
//   alice: 3f2a...                      # 64 hex digits, sha256 of the key
//   ci-bot:
//     sha256: 9b1c...
//     trusted: true                     # may pin X-data-parallel-rank
//     max_concurrent: 4                 # 0 = unlimited
//     requests_per_min: 60              # 0 = unlimited
//     requests_per_day: 5000            # 0 = unlimited (a UTC day)
//     tokens_per_min: 2000000           # exact tokens reserved per minute
//     tokens_per_day: 200000000         #   and per UTC day; 0 = unlimited
//     metrics: true                     # may read GET /metrics on the client port
//
// A limit a key does not set is limits.key_defaults' (the short form
// `name: <hash>` takes them all).
// An empty file holds no keys.
#pragma once

#include "conf/config.hpp"

#include <string>
#include <vector>

namespace dpgate::conf {

// Throws ConfigError whose key path starts with the file's path:
// "conf: /etc/dpgate/keys.yaml: alice.sha256: line 3: expected 64 hex digits".
std::vector<AuthKey> loadKeysFile(const std::string& path, const AuthKey& defaults = {});
std::vector<AuthKey> parseKeysText(const std::string& yaml_text, const std::string& source_name,
                                   const AuthKey& defaults = {});

}  // namespace dpgate::conf
