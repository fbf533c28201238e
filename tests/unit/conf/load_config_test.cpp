// What a valid config turns into: defaults, parsed fields, resolved paths.
#include "conf/config.hpp"
#include "conf/sha256_hex.hpp"
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

namespace dpgate::conf {
namespace {

using test::minimal_backends;
using test::TempDir;

Config load(const std::string& yaml, const std::string& base_dir = "/etc/dpgate") {
    return loadConfigText(yaml, base_dir, {.check_files = false});
}

TEST(LoadConfig, UnsetKeysKeepTheirDefaults) {
    Config config = load(minimal_backends);
    EXPECT_EQ(config.backends.size(), 1u);
    config.backends.clear();
    EXPECT_EQ(config.shared_digest.size(), 64u);  // derived from the text, not a default
    config.shared_digest.clear();
    EXPECT_TRUE(config == Config{});
    // Empty sections are allowed and change nothing.
    Config sparse = load(std::string("listen:\nlimits:\nauth:\n") + minimal_backends);
    sparse.backends.clear();
    sparse.shared_digest.clear();
    EXPECT_TRUE(sparse == Config{});
}

TEST(LoadConfig, ReadsEverySection) {
    const Config config = load(
        "listen: {address: 0.0.0.0, port: 443, tls: {cert: tls/c.pem, key: /k.pem}}\n"
        "admin: {address: ::1, port: 0, token_file: admin.token}\n"
        "model:\n"
        "  id: m\n"
        "  aliases: [deepseek, ds]\n"
        "  window_tokens: 131072\n"
        "  max_output_tokens: 8192\n"
        "  image_reserve_tokens: 0\n"
        "  max_images: 0\n"
        "  tokenizer: tok/tokenizer.json\n"
        "limits: {max_connections: 5, upstream_max_idle_connections: 0, max_header_count: 7}\n"
        "routing: {mode: active-active, session_header: X-Conv, balance_factor: 2.5, work_balance_factor: 1.1,\n"
        "          work_slack_tokens: 0, work_window_ms: 60000}\n"
        "health: {interval_ms: 1s, timeout_ms: 300, fall: 1, rise: 5}\n"
        "backends:\n"
        "  - name: gpu-a\n"
        "    url: https://gpu-a.internal\n"
        "    dp_ranks: 4\n"
        "    credential_env: GPU_A_TOKEN\n"
        "  - {name: gpu-b, url: \"http://[fd00::2]:8000/\", role: standby}\n"
        "auth: {required: false}\n"
        "log: {access: logs/access.log, level: debug}\n"
        "threads: 3\n"
        "huge_pages: false\n");
    EXPECT_EQ(config.listen.address, "0.0.0.0");
    EXPECT_EQ(config.listen.port, 443);
    EXPECT_EQ(config.listen.tls.cert, "/etc/dpgate/tls/c.pem");
    EXPECT_EQ(config.listen.tls.key, "/k.pem");
    EXPECT_TRUE(config.listen.tls.enabled());
    EXPECT_EQ(config.admin.address, "::1");
    EXPECT_EQ(config.admin.port, 0);
    EXPECT_EQ(config.admin.token_file, "/etc/dpgate/admin.token");
    EXPECT_EQ(config.admin.token_sha256, "");
    EXPECT_EQ(config.model.id, "m");
    EXPECT_EQ(config.model.aliases, (std::vector<std::string>{"deepseek", "ds"}));
    EXPECT_EQ(config.model.window_tokens, 131072u);
    EXPECT_EQ(config.model.max_output_tokens, 8192u);
    EXPECT_EQ(config.model.image_reserve_tokens, 0u);
    EXPECT_EQ(config.model.max_images, 0u);
    EXPECT_EQ(config.model.tokenizer, "/etc/dpgate/tok/tokenizer.json");
    EXPECT_EQ(config.limits.max_connections, 5u);
    EXPECT_EQ(config.limits.upstream_max_idle_connections, 0u);
    EXPECT_EQ(config.limits.max_header_count, 7u);
    EXPECT_EQ(config.routing.mode, RoutingMode::active_active);
    EXPECT_EQ(config.routing.session_header, "X-Conv");
    EXPECT_DOUBLE_EQ(config.routing.balance_factor, 2.5);
    EXPECT_DOUBLE_EQ(config.routing.work_balance_factor, 1.1);
    EXPECT_EQ(config.routing.work_slack_tokens, 0u);
    EXPECT_EQ(config.routing.work_window_ms, 60'000u);
    EXPECT_EQ(config.health.interval_ms, 1000u);
    EXPECT_EQ(config.health.timeout_ms, 300u);
    EXPECT_EQ(config.health.fall, 1u);
    EXPECT_EQ(config.health.rise, 5u);
    ASSERT_EQ(config.backends.size(), 2u);
    EXPECT_EQ(config.backends[0].name, "gpu-a");
    EXPECT_EQ(config.backends[0].url, "https://gpu-a.internal");
    EXPECT_EQ(config.backends[0].scheme, "https");
    EXPECT_EQ(config.backends[0].host, "gpu-a.internal");
    EXPECT_EQ(config.backends[0].port, 443);
    EXPECT_EQ(config.backends[0].role, BackendRole::primary);
    EXPECT_EQ(config.backends[0].dp_ranks, 4u);
    EXPECT_EQ(config.backends[0].credential_env, "GPU_A_TOKEN");
    EXPECT_EQ(config.backends[1].host, "fd00::2");
    EXPECT_EQ(config.backends[1].port, 8000);
    EXPECT_EQ(config.backends[1].role, BackendRole::standby);
    EXPECT_FALSE(config.auth.required);
    EXPECT_EQ(config.log.access, "/etc/dpgate/logs/access.log");
    EXPECT_EQ(config.log.level, "debug");
    EXPECT_EQ(config.threads, 3u);
    EXPECT_FALSE(config.huge_pages);
    EXPECT_TRUE(Config{}.huge_pages);
}

TEST(LoadConfig, AdminTokenForms) {
    const std::string hex(64, 'c');
    EXPECT_EQ(load("admin:\n  token: \"sha256:" + hex + "\"\n" + minimal_backends).admin.token_sha256, hex);
    EXPECT_EQ(load("admin:\n  token: {sha256: " + std::string(64, 'C') + "}\n" + minimal_backends).admin.token_sha256,
              hex);
    EXPECT_EQ(load("admin:\n  token_plain: s3cret\n" + std::string(minimal_backends)).admin.token_sha256,
              sha256Hex("s3cret"));
    EXPECT_EQ(load("admin:\n  token: \"\"\n  token_file: \"\"\n" + std::string(minimal_backends)).admin, AdminConfig{});
}

TEST(LoadConfig, InlineKeysKeepOnlyTheHash) {
    const Config config = load(
        "auth:\n"
        "  keys:\n"
        "    - {name: demo, key: sk-demo, trusted: true, max_concurrent: 2, requests_per_min: 30}\n"
        "    - {name: ops@example.com, sha256: " +
        std::string(64, 'd') + "}\n" + minimal_backends);
    ASSERT_EQ(config.auth.keys.size(), 2u);
    EXPECT_EQ(config.auth.keys[0], (AuthKey{"demo", sha256Hex("sk-demo"), true, 2, 30}));
    EXPECT_EQ(config.auth.keys[1], (AuthKey{"ops@example.com", std::string(64, 'd'), false, 0, 0}));
}

TEST(LoadConfig, InlineKeysMayReadMetrics) {
    const Config config = load(std::string("auth:\n"
                                           "  keys:\n"
                                           "    - {name: prometheus, key: sk-prom, metrics: true}\n"
                                           "    - {name: user, key: sk-user}\n") +
                               minimal_backends);
    ASSERT_EQ(config.auth.keys.size(), 2u);
    EXPECT_EQ(config.auth.keys[0], (AuthKey{"prometheus", sha256Hex("sk-prom"), false, 0, 0, true}));
    EXPECT_FALSE(config.auth.keys[1].metrics);
}

TEST(LoadConfig, SpecialAccessLogTargetsAreNotPaths) {
    for (const char* target : {"stdout", "stderr", "off"})
        EXPECT_EQ(load(std::string("log: {access: ") + target + "}\n" + minimal_backends).log.access, target);
}

TEST(LoadConfig, FilePathsResolveAgainstTheFilesFolder) {
    TempDir dir;
    std::filesystem::create_directories(dir.path() + "/conf");
    dir.write("tokenizer.json", "{}");
    const std::string path =
        dir.write("conf/dpgate.yaml", std::string("model:\n  tokenizer: ../tokenizer.json\n") + minimal_backends);
    const Config config = loadConfigFile(path);
    EXPECT_EQ(config.model.tokenizer, dir.path() + "/tokenizer.json");
    EXPECT_EQ(config.source_path, path);
}

TEST(LoadConfig, AnchorsAndAliasesWork) {
    const Config config = load(
        "limits:\n"
        "  header_timeout_ms: &t 20s\n"
        "  body_idle_timeout_ms: *t\n" +
        std::string(minimal_backends));
    EXPECT_EQ(config.limits.header_timeout_ms, 20000u);
    EXPECT_EQ(config.limits.body_idle_timeout_ms, 20000u);
}

TEST(LoadConfig, ToStringSpellsTheYamlValues) {
    EXPECT_STREQ(toString(BackendRole::primary), "primary");
    EXPECT_STREQ(toString(BackendRole::standby), "standby");
    EXPECT_STREQ(toString(RoutingMode::failover), "failover");
    EXPECT_STREQ(toString(RoutingMode::active_active), "active-active");
}

TEST(LoadConfig, ControlEtcdIsReadWithItsDefaults) {
    const Config config = load(
        "control:\n  replica_id: pod-a\n  etcd:\n    endpoints: [\"http://e1:2379\", "
        "\"https://e2:2379\"]\n    lease_ttl_s: 3\n" +
        std::string(minimal_backends));
    EXPECT_TRUE(config.control.shared());
    EXPECT_EQ(config.control.replica_id, "pod-a");
    EXPECT_EQ(config.control.etcd.endpoints, (std::vector<std::string>{"http://e1:2379", "https://e2:2379"}));
    EXPECT_EQ(config.control.etcd.prefix, "/dpgate/");
    EXPECT_EQ(config.control.etcd.lease_ttl_s, 3u);
    EXPECT_EQ(config.control.etcd.request_timeout_ms, 5000u);
    EXPECT_FALSE(load(minimal_backends).control.shared());
}

TEST(LoadConfig, ControlEtcdRefusesWhatCannotWork) {
    const std::string b = minimal_backends;
    EXPECT_NE(test::errorOf("control:\n  etcd: {}\n" + b).find("control.etcd.endpoints"), std::string::npos);
    EXPECT_NE(test::errorOf("control:\n  etcd: {endpoints: []}\n" + b).find("at least one etcd endpoint"),
              std::string::npos);
    EXPECT_NE(test::errorOf("control:\n  etcd: {endpoints: [\"etcd:2379\"]}\n" + b).find("expected http(s)://"),
              std::string::npos);
    EXPECT_NE(test::errorOf("control:\n  etcd: {endpoints: [\"http://e:1\"], prefix: dpgate}\n" + b)
                  .find("starting and ending with '/'"),
              std::string::npos);
    EXPECT_NE(test::errorOf("control:\n  etcd: {endpoints: [\"http://e:1\"], username: u}\n" + b)
                  .find("username and password_file go together"),
              std::string::npos);
    EXPECT_NE(test::errorOf("control:\n  replica_id: \"a/b\"\n" + b).find("without '/'"), std::string::npos);
}

// Replicas of one deployment differ in where they listen, their state
// folder, their logs and their id; in nothing else without being flagged.
TEST(LoadConfig, TheSharedDigestIgnoresWhatDiffersBetweenReplicasByDesign) {
    const std::string b = minimal_backends;
    const std::string base = load("control:\n  replica_id: a\n" + b).shared_digest;
    EXPECT_EQ(base, load("listen: {port: 9}\nadmin: {port: 10}\nlog: {level: debug}\nstate: {dir: /x}\n"
                         "control:\n  replica_id: b\n" +
                         b)
                        .shared_digest);
    EXPECT_NE(base, load("limits: {max_body_bytes: 1000}\ncontrol:\n  replica_id: a\n" + b).shared_digest);
    EXPECT_NE(base, load("control:\n  replica_id: a\nbackends:\n  - {name: a, url: \"http://h:2\"}\n").shared_digest);
}

}  // namespace
}  // namespace dpgate::conf
