// Unknown keys are errors at every level, named by path and line.
#include "conf/config.hpp"
#include "conf/keys_file.hpp"
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

namespace dpgate::conf {
namespace {

using test::errorOf;

struct UnknownKeyCase {
    std::string yaml;
    std::string expected;  // the full message
};

class UnknownKeys : public ::testing::TestWithParam<UnknownKeyCase> {};

TEST_P(UnknownKeys, AreErrors) { EXPECT_EQ(errorOf(GetParam().yaml), GetParam().expected); }

const std::string b = test::minimal_backends;
const std::string hash_a(64, 'a');

INSTANTIATE_TEST_SUITE_P(
    EveryLevel, UnknownKeys,
    ::testing::Values(
        UnknownKeyCase{
            b + "listn:\n  port: 1\n",
            "conf: listn: line 3: unknown key; expected one of: listen, admin, model, limits, routing, "
            "health, backends, auth, log, metrics, state, acceptance, control, threads, admission_threads, huge_pages"},
        UnknownKeyCase{"listen:\n  prot: 1\n" + b,
                       "conf: listen.prot: line 2: unknown key; expected one of: address, port, tls"},
        UnknownKeyCase{"listen:\n  tls:\n    certificate: x\n" + b,
                       "conf: listen.tls.certificate: line 3: unknown key; expected one of: cert, key"},
        UnknownKeyCase{"admin:\n  password: x\n" + b,
                       "conf: admin.password: line 2: unknown key; expected one of: address, port, token, "
                       "token_file, token_plain"},
        UnknownKeyCase{"admin:\n  token:\n    sha256: " + hash_a + "\n    md5: x\n" + b,
                       "conf: admin.token.md5: line 4: unknown key; expected one of: sha256"},
        UnknownKeyCase{"model:\n  max_tokens: 5\n" + b,
                       "conf: model.max_tokens: line 2: unknown key; expected one of: id, aliases, window_tokens, "
                       "max_output_tokens, image_reserve_tokens, max_images, tokenizer, chat_template, "
                       "chat_template_content_format, count_cache_bytes"},
        UnknownKeyCase{"limits:\n  body_bytes: 5\n" + b,
                       "conf: limits.body_bytes: line 2: unknown key; expected one of: max_body_bytes, "
                       "max_header_bytes, max_header_count, max_connections, header_timeout_ms, "
                       "body_idle_timeout_ms, keepalive_timeout_ms, upstream_connect_timeout_ms, "
                       "upstream_first_byte_timeout_ms, stream_idle_timeout_ms, client_write_timeout_ms, "
                       "upstream_max_idle_connections, upstream_idle_timeout_ms, relay_buffer_bytes, drain_timeout_ms, "
                       "offload_admission_bytes, max_json_depth, max_n, max_buffered_body_bytes, "
                       "max_connections_per_ip, linger_timeout_ms, key_defaults, redis, on_store_unavailable"},
        UnknownKeyCase{"routing:\n  strategy: x\n" + b,
                       "conf: routing.strategy: line 2: unknown key; expected one of: mode, session_header, "
                       "balance_factor, work_balance_factor, work_slack_tokens, work_window_ms, "
                       "failover_requires_acceptance"},
        UnknownKeyCase{"state:\n  path: /x\n" + b, "conf: state.path: line 2: unknown key; expected one of: dir"},
        UnknownKeyCase{"acceptance:\n  folder: /x\n" + b,
                       "conf: acceptance.folder: line 2: unknown key; expected one of: dir"},
        UnknownKeyCase{"health:\n  path: /health\n" + b,
                       "conf: health.path: line 2: unknown key; expected one of: interval_ms, timeout_ms, fall, rise"},
        UnknownKeyCase{"backends:\n  - name: a\n    url: http://h:1\n    weight: 2\n",
                       "conf: backends[0].weight: line 4: unknown key; expected one of: name, url, role, dp_ranks, "
                       "credential_env"},
        UnknownKeyCase{"auth:\n  enabled: true\n" + b,
                       "conf: auth.enabled: line 2: unknown key; expected one of: required, keys_file, keys"},
        UnknownKeyCase{"auth:\n  keys:\n    - {name: a, key: k, admin: true}\n" + b,
                       "conf: auth.keys[0].admin: line 3: unknown key; expected one of: name, sha256, key, trusted, "
                       "max_concurrent, requests_per_min, requests_per_day, tokens_per_min, tokens_per_day, metrics"},
        UnknownKeyCase{"log:\n  format: json\n" + b,
                       "conf: log.format: line 2: unknown key; expected one of: access, level"},
        // A YAML 1.1 merge key is not supported by yaml-cpp: it is just an unknown key.
        UnknownKeyCase{"listen:\n  <<: {port: 1}\n" + b,
                       "conf: listen.<<: line 2: unknown key; expected one of: address, port, tls"},
        UnknownKeyCase{"listen:\n  ? [a]\n  : 1\n" + b, "conf: listen: line 2: expected a plain key, got a sequence"}));

TEST(UnknownKeysInKeysFile, AreErrors) {
    try {
        parseKeysText("alice:\n  sha256: " + hash_a + "\n  admin: true\n", "/etc/dpgate/keys.yaml");
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_STREQ(e.what(),
                     "conf: /etc/dpgate/keys.yaml: alice.admin: line 3: unknown key; expected one of: sha256, trusted, "
                     "max_concurrent, requests_per_min, requests_per_day, tokens_per_min, tokens_per_day, metrics");
    }
}

}  // namespace
}  // namespace dpgate::conf
