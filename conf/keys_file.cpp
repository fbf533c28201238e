#include "conf/keys_file.hpp"

#include "conf/auth_key_reader.hpp"
#include "conf/sha256_hex.hpp"
#include "conf/yaml_reader.hpp"

namespace dpgate::conf {

namespace {

std::vector<AuthKey> parseKeys(const std::string& yaml_text, const AuthKey& defaults) {
    using namespace detail;
    const MappingReader file = MappingReader::anyKeys(parseDocument(yaml_text));
    std::vector<AuthKey> keys;
    for (const MappingReader::Entry& entry : file.entries()) {
        checkKeyName({entry.value.path, entry.value.node, entry.key_line}, entry.key);
        if (entry.value.node.IsMap()) {
            const MappingReader fields(entry.value,
                                       {"sha256", "trusted", "max_concurrent", "requests_per_min", "requests_per_day",
                                        "tokens_per_min", "tokens_per_day", "metrics"});
            keys.push_back(readAuthKey(fields, entry.key, false, defaults));
        } else {
            // The short form `name: <hash>` that `dpgate keys add` appends.
            const Field& value = entry.value;
            const std::optional<std::string> hex =
                value.node.IsScalar() ? normalizeSha256Hex(value.node.Scalar()) : std::nullopt;
            if (!hex) fail(value, "expected 64 hex digits (the SHA-256 of the key) or a mapping with sha256");
            AuthKey key = defaults;
            key.name = entry.key;
            key.sha256 = *hex;
            keys.push_back(std::move(key));
        }
    }
    return keys;
}

}  // namespace

std::vector<AuthKey> parseKeysText(const std::string& yaml_text, const std::string& source_name,
                                   const AuthKey& defaults) {
    try {
        return parseKeys(yaml_text, defaults);
    } catch (const ConfigError& e) {
        throw ConfigError(e.key_path().empty() ? source_name : source_name + ": " + e.key_path(), e.line(), e.detail());
    }
}

std::vector<AuthKey> loadKeysFile(const std::string& path, const AuthKey& defaults) {
    const std::string text = detail::readTextFile(path, {"", YAML::Node(), 0});
    return parseKeysText(text, path, defaults);
}

}  // namespace dpgate::conf
