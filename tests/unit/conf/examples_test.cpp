// conf/examples/*.yaml load, and dpgate.yaml documents exactly the defaults.
#include "conf/config.hpp"
#include "conf/sha256_hex.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

namespace dpgate::conf {
namespace {

const std::string examples = std::string(DPGATE_SOURCE_DIR) + "/conf/examples";

std::string normal(const std::string& path) { return std::filesystem::path(path).lexically_normal().string(); }

TEST(Examples, ReferenceEqualsTheDefaults) {
    const Config loaded = loadConfigFile(examples + "/dpgate.yaml");
    Config expected;
    expected.source_path = normal(examples + "/dpgate.yaml");
    ASSERT_EQ(loaded.backends.size(), 1u);  // backends has no default; the reference shows one
    expected.backends = loaded.backends;
    expected.shared_digest = loaded.shared_digest;  // derived from the file's text
    // Section by section first, so a failure says which one drifted.
    EXPECT_TRUE(loaded.listen == expected.listen);
    EXPECT_TRUE(loaded.admin == expected.admin);
    EXPECT_TRUE(loaded.model == expected.model);
    EXPECT_TRUE(loaded.limits == expected.limits);
    EXPECT_TRUE(loaded.routing == expected.routing);
    EXPECT_TRUE(loaded.health == expected.health);
    EXPECT_TRUE(loaded.auth == expected.auth);
    EXPECT_TRUE(loaded.log == expected.log);
    EXPECT_TRUE(loaded.state == expected.state);
    EXPECT_TRUE(loaded.acceptance == expected.acceptance);
    EXPECT_EQ(loaded.threads, expected.threads);
    EXPECT_TRUE(loaded == expected);

    const BackendConfig& backend = loaded.backends[0];
    const BackendConfig default_backend;
    EXPECT_EQ(backend.role, default_backend.role);
    EXPECT_EQ(backend.dp_ranks, default_backend.dp_ranks);
    EXPECT_EQ(backend.credential_env, default_backend.credential_env);
}

// Every leaf key path in a YAML tree; sequence items of mappings show as "[]".
void collectKeys(const YAML::Node& node, const std::string& path, std::set<std::string>& out) {
    if (node.IsMap()) {
        for (const auto& entry : node) {
            const std::string key = entry.first.as<std::string>();
            collectKeys(entry.second, path.empty() ? key : path + "." + key, out);
        }
    } else if (node.IsSequence() && node.size() > 0 && node[0].IsMap()) {
        for (const auto& item : node) collectKeys(item, path + "[]", out);
    } else {
        out.insert(path);
    }
}

TEST(Examples, ReferenceShowsEveryKey) {
    // The schema, spelled out. admin.token_plain and the inline auth.keys
    // fields are documented in comments only: they must not carry defaults.
    const std::set<std::string> schema = {
        "listen.address",
        "listen.port",
        "listen.tls.cert",
        "listen.tls.key",
        "admin.address",
        "admin.port",
        "admin.token",
        "admin.token_file",
        "model.id",
        "model.aliases",
        "model.window_tokens",
        "model.max_output_tokens",
        "model.image_reserve_tokens",
        "model.max_images",
        "model.tokenizer",
        "model.chat_template",
        "model.chat_template_content_format",
        "model.count_cache_bytes",
        "limits.max_body_bytes",
        "limits.max_header_bytes",
        "limits.max_header_count",
        "limits.max_connections",
        "limits.header_timeout_ms",
        "limits.body_idle_timeout_ms",
        "limits.keepalive_timeout_ms",
        "limits.upstream_connect_timeout_ms",
        "limits.upstream_first_byte_timeout_ms",
        "limits.stream_idle_timeout_ms",
        "limits.client_write_timeout_ms",
        "limits.upstream_max_idle_connections",
        "limits.upstream_idle_timeout_ms",
        "limits.relay_buffer_bytes",
        "limits.drain_timeout_ms",
        "limits.offload_admission_bytes",
        "limits.max_json_depth",
        "limits.max_n",
        "limits.max_buffered_body_bytes",
        "limits.max_connections_per_ip",
        "limits.linger_timeout_ms",
        "limits.key_defaults.max_concurrent",
        "limits.key_defaults.requests_per_min",
        "limits.key_defaults.requests_per_day",
        "limits.key_defaults.tokens_per_min",
        "limits.key_defaults.tokens_per_day",
        "limits.on_store_unavailable",
        "routing.mode",
        "routing.session_header",
        "routing.balance_factor",
        "routing.work_balance_factor",
        "routing.work_slack_tokens",
        "routing.work_window_ms",
        "routing.failover_requires_acceptance",
        "health.interval_ms",
        "health.timeout_ms",
        "health.fall",
        "health.rise",
        "backends[].name",
        "backends[].url",
        "backends[].role",
        "backends[].dp_ranks",
        "backends[].credential_env",
        "auth.required",
        "auth.keys_file",
        "auth.keys",
        "log.access",
        "log.level",
        "metrics.enabled",
        "metrics.stream_usage",
        "state.dir",
        "acceptance.dir",
        "threads",
        "admission_threads",
        "huge_pages",
    };
    std::set<std::string> found;
    collectKeys(YAML::LoadFile(examples + "/dpgate.yaml"), "", found);
    std::vector<std::string> missing_keys;
    std::set_difference(schema.begin(), schema.end(), found.begin(), found.end(), std::back_inserter(missing_keys));
    EXPECT_TRUE(missing_keys.empty()) << "dpgate.yaml lacks " << ::testing::PrintToString(missing_keys);
    EXPECT_EQ(found, schema);
}

TEST(Examples, LocalDemoHasTheDocumentedValues) {
    const Config config = loadConfigFile(examples + "/local.yaml", {.check_files = false});
    EXPECT_EQ(config.listen.address, "127.0.0.1");
    EXPECT_EQ(config.listen.port, 8900);
    EXPECT_FALSE(config.listen.tls.enabled());
    EXPECT_EQ(config.admin.address, "127.0.0.1");
    EXPECT_EQ(config.admin.port, 8901);
    EXPECT_EQ(config.admin.token_sha256, sha256Hex("admin-dpgate-local"));
    EXPECT_EQ(config.admin.token_file, "");
    EXPECT_EQ(config.model.id, "ds-v4.1-flash-1017");
    EXPECT_EQ(config.model.window_tokens, 1048576u);
    EXPECT_EQ(config.model.max_output_tokens, 32768u);
    EXPECT_EQ(config.model.max_images, 640u);
    EXPECT_EQ(config.model.image_reserve_tokens, 1024u);
    EXPECT_EQ(config.model.chat_template, "");
    EXPECT_EQ(config.model.chat_template_content_format, "auto");
    EXPECT_EQ(config.model.tokenizer,
              normal(std::string(DPGATE_SOURCE_DIR) + "/local/tokenizer/deepseek-v3/tokenizer.json"));
    EXPECT_EQ(config.limits.max_body_bytes, 256u * 1024 * 1024);
    EXPECT_EQ(config.routing.mode, RoutingMode::failover);

    ASSERT_EQ(config.backends.size(), 2u);
    const BackendConfig& primary = config.backends[0];
    EXPECT_EQ(primary.name, "primary");
    EXPECT_EQ(primary.url, "http://127.0.0.1:18000");
    EXPECT_EQ(primary.scheme, "http");
    EXPECT_EQ(primary.host, "127.0.0.1");
    EXPECT_EQ(primary.port, 18000);
    EXPECT_EQ(primary.role, BackendRole::primary);
    EXPECT_EQ(primary.dp_ranks, 8u);
    const BackendConfig& standby = config.backends[1];
    EXPECT_EQ(standby.name, "standby");
    EXPECT_EQ(standby.port, 18001);
    EXPECT_EQ(standby.role, BackendRole::standby);
    EXPECT_EQ(standby.dp_ranks, 8u);

    EXPECT_TRUE(config.auth.required);
    ASSERT_EQ(config.auth.keys.size(), 1u);
    EXPECT_EQ(config.auth.keys[0].sha256, sha256Hex("sk-dpgate-local"));
}

TEST(Examples, LocalDemoChecksItsTokenizerWhenAskedTo) {
    const std::string tokenizer =
        normal(std::string(DPGATE_SOURCE_DIR) + "/local/tokenizer/deepseek-v3/tokenizer.json");
    if (std::filesystem::is_regular_file(tokenizer)) {
        EXPECT_EQ(loadConfigFile(examples + "/local.yaml").model.tokenizer, tokenizer);
    } else {
        try {
            loadConfigFile(examples + "/local.yaml");
            FAIL() << "no error although " << tokenizer << " is missing";
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.key_path(), "model.tokenizer");
            EXPECT_EQ(e.detail(), "file not found: " + tokenizer);
        }
    }
}

}  // namespace
}  // namespace dpgate::conf
