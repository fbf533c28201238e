// The client API keys file named by auth.keys_file. Only hashes, never keys:
//
//   alice: 3f2a...                      # 64 hex digits, sha256 of the key
//   ci-bot:
//     sha256: 9b1c...
//     trusted: true                     # may pin X-data-parallel-rank
//     max_concurrent: 4                 # 0 = unlimited
//     requests_per_min: 60              # 0 = unlimited
//     metrics: true                     # may read GET /metrics on the client port
//
// An empty file holds no keys.
#pragma once

#include "conf/config.hpp"

#include <string>
#include <vector>

namespace dpgate::conf {

// Throws ConfigError whose key path starts with the file's path:
// "conf: /etc/dpgate/keys.yaml: alice.sha256: line 3: expected 64 hex digits".
std::vector<AuthKey> loadKeysFile(const std::string& path);
std::vector<AuthKey> parseKeysText(const std::string& yaml_text, const std::string& source_name);

}  // namespace dpgate::conf
