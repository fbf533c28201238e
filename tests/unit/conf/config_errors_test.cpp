// Every error class, with its exact message: key path, line, what is wrong.
#include "conf/config.hpp"
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

namespace dpgate::conf {
namespace {

using test::errorOf;
using test::minimal_backends;
using test::TempDir;

const std::string hash_a(64, 'a');

TEST(ConfigErrors, BackendUrl) {
    EXPECT_EQ(errorOf("backends:\n"
                      "  - name: a\n"
                      "    url: http://h:1\n"
                      "  - name: b\n"
                      "    url: ftp://h:2\n"),
              "conf: backends[1].url: line 5: expected http(s)://host:port");
    EXPECT_EQ(errorOf("backends:\n  - {name: a, url: \"http://h:70000\"}\n"),
              "conf: backends[0].url: line 2: expected http(s)://host:port");
    EXPECT_EQ(errorOf("backends:\n  - {name: a, url: \"http://h:1/v1\"}\n"),
              "conf: backends[0].url: line 2: expected http(s)://host:port");
}

TEST(ConfigErrors, WrongTypes) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("listen:\n  port: abc\n" + b), "conf: listen.port: line 2: expected an integer, got \"abc\"");
    EXPECT_EQ(errorOf("listen:\n  port: \"8900\"\n" + b),
              "conf: listen.port: line 2: expected an integer, got \"8900\"");
    EXPECT_EQ(errorOf("listen:\n  port: 1.5\n" + b), "conf: listen.port: line 2: expected an integer, got \"1.5\"");
    EXPECT_EQ(errorOf("listen:\n  port:\n" + b), "conf: listen.port: line 2: expected an integer, got null");
    EXPECT_EQ(errorOf("model:\n  id: {a: 1}\n" + b), "conf: model.id: line 2: expected a string, got a mapping");
    EXPECT_EQ(errorOf("model:\n  id: ~\n" + b), "conf: model.id: line 2: expected a string, got null");
    EXPECT_EQ(errorOf("model:\n  aliases: x\n" + b), "conf: model.aliases: line 2: expected a sequence, got \"x\"");
    EXPECT_EQ(errorOf("limits: 5\n" + b), "conf: limits: line 1: expected a mapping, got \"5\"");
    EXPECT_EQ(errorOf("backends: {name: a}\n"), "conf: backends: line 1: expected a sequence, got a mapping");
    EXPECT_EQ(errorOf("backends:\n  - a\n"), "conf: backends[0]: line 2: expected a mapping, got \"a\"");
    EXPECT_EQ(errorOf("auth:\n  required: yes\n" + b),
              "conf: auth.required: line 2: expected true or false, got \"yes\"");
    EXPECT_EQ(errorOf("auth:\n  required: \"true\"\n" + b),
              "conf: auth.required: line 2: expected true or false, got \"true\"");
    EXPECT_EQ(errorOf("huge_pages: on\n" + b), "conf: huge_pages: line 1: expected true or false, got \"on\"");
    EXPECT_EQ(errorOf("routing:\n  balance_factor: fast\n" + b),
              "conf: routing.balance_factor: line 2: expected a number, got \"fast\"");
    EXPECT_EQ(errorOf("routing:\n  balance_factor: nan\n" + b),
              "conf: routing.balance_factor: line 2: expected a number, got \"nan\"");
    EXPECT_EQ(errorOf("[1, 2]\n"), "conf: line 1: expected a mapping, got a sequence");
    EXPECT_EQ(errorOf("just text\n"), "conf: line 1: expected a mapping, got \"just text\"");
}

TEST(ConfigErrors, NegativeNumbers) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("health:\n  fall: -1\n" + b),
              "conf: health.fall: line 2: expected a non-negative integer, got \"-1\"");
    EXPECT_EQ(errorOf("threads: -4\n" + b), "conf: threads: line 1: expected a non-negative integer, got \"-4\"");
    EXPECT_EQ(errorOf("backends:\n  - {name: a, url: \"http://h:1\", dp_ranks: -8}\n"),
              "conf: backends[0].dp_ranks: line 2: expected a non-negative integer, got \"-8\"");
}

TEST(ConfigErrors, OutOfRange) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("listen:\n  port: 70000\n" + b),
              "conf: listen.port: line 2: must be between 0 and 65535, got 70000");
    EXPECT_EQ(errorOf("admin:\n  port: 65536\n" + b),
              "conf: admin.port: line 2: must be between 0 and 65535, got 65536");
    EXPECT_EQ(errorOf("threads: 99999999999999999999999\n" + b),
              "conf: threads: line 1: must be between 0 and 1024, got \"99999999999999999999999\"");
    EXPECT_EQ(errorOf("health:\n  rise: 0\n" + b), "conf: health.rise: line 2: must be between 1 and 1000, got 0");
    EXPECT_EQ(errorOf("backends:\n  - {name: a, url: \"http://h:1\", dp_ranks: 0}\n"),
              "conf: backends[0].dp_ranks: line 2: must be between 1 and 1024, got 0");
    EXPECT_EQ(errorOf("limits:\n  max_connections: 0\n" + b),
              "conf: limits.max_connections: line 2: must be between 1 and 10000000, got 0");
    EXPECT_EQ(errorOf("limits:\n  max_json_depth: 5000\n" + b),
              "conf: limits.max_json_depth: line 2: must be between 2 and 1000, got 5000");
    EXPECT_EQ(errorOf("limits:\n  max_n: 0\n" + b), "conf: limits.max_n: line 2: must be between 1 and 128, got 0");
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: 2GiB\n  max_buffered_body_bytes: 1GiB\n" + b),
              "conf: limits.max_buffered_body_bytes: line 3: must be at least limits.max_body_bytes (2147483648)");
}

TEST(ConfigErrors, DuplicateBackends) {
    EXPECT_EQ(errorOf("backends:\n"
                      "  - {name: a, url: \"http://h:1\"}\n"
                      "  - {name: a, url: \"http://h:2\", role: standby}\n"),
              "conf: backends[1].name: line 3: duplicate backend name \"a\" (also backends[0])");
    EXPECT_EQ(errorOf("backends:\n"
                      "  - {name: a, url: \"http://h:1\"}\n"
                      "  - {name: b, url: \"http://h:1/\", role: standby}\n"),
              "conf: backends[1].url: line 3: same address as backends[0]");
}

TEST(ConfigErrors, NoBackends) {
    EXPECT_EQ(errorOf("backends: []\n"), "conf: backends: line 1: at least one backend is required");
    EXPECT_EQ(errorOf("backends:\n"), "conf: backends: line 1: at least one backend is required");
    EXPECT_EQ(errorOf("threads: 1\n"), "conf: backends: line 1: at least one backend is required");
    EXPECT_EQ(errorOf(""), "conf: backends: line 1: at least one backend is required");
    EXPECT_EQ(errorOf("# only a comment\n"), "conf: backends: line 1: at least one backend is required");
}

TEST(ConfigErrors, BackendFields) {
    EXPECT_EQ(errorOf("backends:\n  - url: \"http://h:1\"\n"), "conf: backends[0].name: line 2: missing (required)");
    EXPECT_EQ(errorOf("backends:\n  - name: a\n"), "conf: backends[0].url: line 2: missing (required)");
    EXPECT_EQ(errorOf("backends:\n  - {name: \"a/b\", url: \"http://h:1\"}\n"),
              "conf: backends[0].name: line 2: backend name must be 1-64 characters of [A-Za-z0-9._-]");
    EXPECT_EQ(errorOf("backends:\n  - {name: a, url: \"http://h:1\", role: leader}\n"),
              "conf: backends[0].role: line 2: expected primary or standby, got \"leader\"");
    EXPECT_EQ(
        errorOf("backends:\n  - {name: a, url: \"http://h:1\", credential_env: 1TOKEN}\n"),
        "conf: backends[0].credential_env: line 2: expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
}

TEST(ConfigErrors, PrimariesInFailover) {
    EXPECT_EQ(
        errorOf("backends:\n"
                "  - {name: a, url: \"http://h:1\"}\n"
                "  - {name: b, url: \"http://h:2\", role: primary}\n"),
        "conf: backends[1].role: line 3: routing.mode failover allows one primary; backends[0] is already primary");
    // The role defaults to primary: the error points at the backend that lacks one.
    EXPECT_EQ(
        errorOf("backends:\n"
                "  - name: a\n"
                "    url: http://h:1\n"
                "  - name: b\n"
                "    url: http://h:2\n"),
        "conf: backends[1].role: line 4: routing.mode failover allows one primary; backends[0] is already primary");
    EXPECT_EQ(errorOf("backends:\n"
                      "  - {name: a, url: \"http://h:1\", role: standby}\n"
                      "  - {name: b, url: \"http://h:2\", role: standby}\n"),
              "conf: backends: line 2: routing.mode failover needs one backend with role primary");
    // The routing section may come after the backends; the check still sees it.
    EXPECT_EQ(errorOf("backends:\n"
                      "  - {name: a, url: \"http://h:1\"}\n"
                      "  - {name: b, url: \"http://h:2\"}\n"
                      "routing:\n"
                      "  mode: active-active\n"),
              "no error");
}

TEST(ConfigErrors, WindowBelowOutputBudget) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("model:\n  window_tokens: 1000\n" + b),
              "conf: model.window_tokens: line 2: must be at least model.max_output_tokens (32768), got 1000");
    EXPECT_EQ(errorOf("model:\n  window_tokens: 1000\n  max_output_tokens: 2000\n" + b),
              "conf: model.max_output_tokens: line 3: must not exceed model.window_tokens (1000), got 2000");
    EXPECT_EQ(errorOf("model:\n  window_tokens: 1000\n  max_output_tokens: 1000\n" + b), "no error");
    EXPECT_EQ(errorOf("model:\n  max_output_tokens: 0\n" + b),
              "conf: model.max_output_tokens: line 2: must be between 1 and 1099511627776, got 0");
}

TEST(ConfigErrors, BalanceFactorBelowOne) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("routing:\n  balance_factor: 0.5\n" + b),
              "conf: routing.balance_factor: line 2: must be between 1 and 100, got 0.5");
    EXPECT_EQ(errorOf("routing:\n  balance_factor: -2\n" + b),
              "conf: routing.balance_factor: line 2: must be between 1 and 100, got -2");
    EXPECT_EQ(errorOf("routing:\n  balance_factor: 1\n" + b), "no error");
}

TEST(ConfigErrors, EnumsAndNames) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("model:\n  template: deepseek-v3\n" + b),
              "conf: model.template: line 2: removed: the chat template is the model's own (the tokenizer_config.json "
              "beside model.tokenizer), or a Jinja file given as model.chat_template");
    EXPECT_EQ(errorOf("model:\n  chat_template_content_format: json\n" + b),
              "conf: model.chat_template_content_format: line 2: expected auto, string or openai, got \"json\"");
    EXPECT_EQ(errorOf("routing:\n  mode: round-robin\n" + b),
              "conf: routing.mode: line 2: expected failover or active-active, got \"round-robin\"");
    EXPECT_EQ(errorOf("routing:\n  session_header: \"X Session\"\n" + b),
              "conf: routing.session_header: line 2: expected an HTTP header name");
    EXPECT_EQ(errorOf("log:\n  level: trace\n" + b),
              "conf: log.level: line 2: expected error, warn, info or debug, got \"trace\"");
    EXPECT_EQ(errorOf("log:\n  access: \"\"\n" + b),
              "conf: log.access: line 2: expected stdout, stderr, off or a file path");
    EXPECT_EQ(errorOf("model:\n  id: \"\"\n" + b), "conf: model.id: line 2: must not be empty");
    EXPECT_EQ(errorOf("model:\n  aliases: [a, a]\n" + b), "conf: model.aliases[1]: line 2: duplicate alias \"a\"");
    EXPECT_EQ(errorOf("model:\n  aliases:\n    - ds-v4.1-flash-1017\n" + b),
              "conf: model.aliases[0]: line 3: same as model.id");
    EXPECT_EQ(errorOf("listen:\n  address: \"\"\n" + b),
              "conf: listen.address: line 2: expected a host name or an IP address, got \"\"");
}

TEST(ConfigErrors, AdminToken) {
    const std::string b = minimal_backends;
    const std::string expected =
        "expected \"sha256:<64 hex digits>\" or {sha256: <64 hex digits>} (a plain token belongs in token_file, or "
        "token_plain for demos)";
    EXPECT_EQ(errorOf("admin:\n  token: hunter2\n" + b), "conf: admin.token: line 2: " + expected);
    EXPECT_EQ(errorOf("admin:\n  token: \"sha256:abc\"\n" + b), "conf: admin.token: line 2: " + expected);
    EXPECT_EQ(errorOf("admin:\n  token: \"sha256:" + std::string(64, 'g') + "\"\n" + b),
              "conf: admin.token: line 2: " + expected);
    EXPECT_EQ(errorOf("admin:\n  token: [1]\n" + b),
              "conf: admin.token: line 2: expected \"sha256:<64 hex digits>\" or {sha256: <64 hex digits>}");
    EXPECT_EQ(errorOf("admin:\n  token:\n    sha256: abc\n" + b),
              "conf: admin.token.sha256: line 3: expected 64 hex digits (the SHA-256 of the admin token)");
    EXPECT_EQ(errorOf("admin:\n  token: {}\n" + b), "conf: admin.token.sha256: line 2: missing (required)");
    EXPECT_EQ(errorOf("admin:\n  token: \"sha256:" + hash_a + "\"\n  token_plain: x\n" + b),
              "conf: admin.token_plain: line 3: give only one of admin.token, admin.token_file, admin.token_plain "
              "(admin.token is set)");
    EXPECT_EQ(errorOf("admin:\n  token_file: t\n  token_plain: x\n" + b),
              "conf: admin.token_plain: line 3: give only one of admin.token, admin.token_file, admin.token_plain "
              "(admin.token_file is set)");
    EXPECT_EQ(errorOf("admin:\n  token_plain: \"\"\n" + b), "conf: admin.token_plain: line 2: must not be empty");
    EXPECT_EQ(errorOf("admin:\n  port: 8900\n" + b), "conf: admin.port: line 2: same port as listen.port (8900)");
    EXPECT_EQ(errorOf("listen:\n  port: 8901\n" + b), "conf: listen.port: line 2: same port as admin.port (8901)");
    EXPECT_EQ(errorOf("listen:\n  address: 0.0.0.0\nadmin:\n  port: 8900\n" + b),
              "conf: admin.port: line 4: same port as listen.port (8900)");
    EXPECT_EQ(errorOf("admin:\n  address: 127.0.0.2\n  port: 8900\n" + b), "no error");
    EXPECT_EQ(errorOf("listen:\n  port: 0\nadmin:\n  port: 0\n" + b), "no error");
}

TEST(ConfigErrors, InlineAuthKeys) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("auth:\n  keys:\n    - {name: a}\n" + b),
              "conf: auth.keys[0]: line 3: missing sha256 (or, in demo configs, key)");
    EXPECT_EQ(errorOf("auth:\n  keys:\n    - {sha256: " + hash_a + "}\n" + b),
              "conf: auth.keys[0].name: line 3: missing (required)");
    EXPECT_EQ(errorOf("auth:\n  keys:\n    - {name: a, sha256: " + hash_a + ", key: k}\n" + b),
              "conf: auth.keys[0].key: line 3: give either sha256 or key, not both");
    EXPECT_EQ(errorOf("auth:\n  keys:\n    - {name: a, sha256: xyz}\n" + b),
              "conf: auth.keys[0].sha256: line 3: expected 64 hex digits (the SHA-256 of the key)");
    EXPECT_EQ(errorOf("auth:\n  keys:\n    - {name: \"a b\", key: k}\n" + b),
              "conf: auth.keys[0].name: line 3: key name must be 1-64 characters of [A-Za-z0-9._@-]");
    EXPECT_EQ(errorOf("auth:\n  keys:\n    - {name: a, key: k1}\n    - {name: a, key: k2}\n" + b),
              "conf: auth.keys[1].name: line 4: duplicate key name \"a\" (also auth.keys[0])");
    EXPECT_EQ(errorOf("auth:\n  keys:\n    - {name: a, key: k1}\n    - {name: b, key: k1}\n" + b),
              "conf: auth.keys[1]: line 4: same key as auth.keys[0] (\"a\")");
    EXPECT_EQ(errorOf("auth:\n  keys:\n    - {name: a, key: k, max_concurrent: -1}\n" + b),
              "conf: auth.keys[0].max_concurrent: line 3: expected a non-negative integer, got \"-1\"");
}

TEST(ConfigErrors, DuplicateKeysInAMapping) {
    EXPECT_EQ(errorOf("threads: 1\nthreads: 2\n"), "conf: threads: line 2: duplicate key (first at line 1)");
    EXPECT_EQ(errorOf(std::string(minimal_backends) + "listen:\n  port: 1\n  port: 2\n"),
              "conf: listen.port: line 5: duplicate key (first at line 4)");
}

TEST(ConfigErrors, YamlSyntaxErrorsBecomeConfigErrorsWithTheirLine) {
    try {
        loadConfigText("threads: 1\nlisten:\n  port: [1, 2\n", ".", {.check_files = false});
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.key_path(), "");
        EXPECT_GE(e.line(), 3);
        EXPECT_EQ(std::string(e.what()).rfind("conf: line " + std::to_string(e.line()) + ": invalid YAML: ", 0), 0u)
            << e.what();
    }
    EXPECT_EQ(errorOf("a: b: c\n"), "conf: line 1: invalid YAML: illegal map value");
    EXPECT_EQ(errorOf("threads: 1\n  x: 2\n"), "conf: line 2: invalid YAML: illegal map value");
    EXPECT_EQ(errorOf("listen:\n  port: 1\n bad: 2\n"), "conf: line 3: invalid YAML: end of map not found");
    EXPECT_EQ(errorOf("threads: 1\n\tlisten: 2\n"),
              "conf: line 2: invalid YAML: illegal tab when looking for indentation");
    EXPECT_EQ(errorOf("threads: *nope\n"), "conf: line 1: invalid YAML: the referenced anchor is not defined");
    // yaml-cpp's own recursion limit (2,000 levels) surfaces as a ConfigError, not a stack overflow.
    const std::string deep = "threads: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
    EXPECT_EQ(errorOf(deep).rfind("conf: line 1: invalid YAML: ", 0), 0u) << errorOf(deep);
}

TEST(ConfigErrors, OneDocumentOnly) {
    EXPECT_EQ(errorOf(std::string(minimal_backends) + "---\nthreads: 2\n"),
              "conf: line 3: expected one YAML document; another starts here");
    EXPECT_EQ(errorOf("---\n---\n"), "conf: line 2: expected one YAML document; another starts here");
    // "..." ends the document; nothing follows it, so it is still one.
    EXPECT_EQ(errorOf(std::string(minimal_backends) + "...\n"), "no error");
}

// Found by fuzz_conf: yaml-cpp 0.7 reports a stray ',' as an endless run of
// empty documents; YAML::LoadAll never returned and ate memory.
TEST(ConfigErrors, StrayCommaIsAnErrorNotAHang) {
    EXPECT_EQ(errorOf(",a: 1\n"), "conf: line 1: invalid YAML: unexpected ','");
    EXPECT_EQ(errorOf(",imits:\n  header_timeout_ms: &t 20s\n"), "conf: line 1: invalid YAML: unexpected ','");
    EXPECT_EQ(errorOf("- a\n,\n"), "conf: line 2: invalid YAML: unexpected ','");
    EXPECT_EQ(errorOf("\n\n  ,\n"), "conf: line 3: invalid YAML: unexpected ','");
    EXPECT_EQ(errorOf("&x ,\n"), "conf: line 1: invalid YAML: unexpected ','");
}

TEST(ConfigErrors, MissingFiles) {
    TempDir dir;
    const std::string b = minimal_backends;
    const LoadOptions check{.check_files = true};
    EXPECT_EQ(errorOf("model:\n  tokenizer: nope.json\n" + b, dir.path(), check),
              "conf: model.tokenizer: line 2: file not found: " + dir.path() + "/nope.json");
    // A directory is fine when it holds a tokenizer.json (and, beside it, the model's chat template).
    EXPECT_EQ(errorOf("model:\n  tokenizer: .\n" + b, dir.path(), check),
              "conf: model.tokenizer: line 2: no tokenizer.json in " + dir.path());
    EXPECT_EQ(errorOf("model:\n  chat_template: nope.jinja\n" + b, dir.path(), check),
              "conf: model.chat_template: line 2: file not found: " + dir.path() + "/nope.jinja");
    EXPECT_EQ(errorOf("listen:\n  tls:\n    cert: c.pem\n    key: k.pem\n" + b, dir.path(), check),
              "conf: listen.tls.cert: line 3: file not found: " + dir.path() + "/c.pem");
    EXPECT_EQ(errorOf("admin:\n  token_file: /nonexistent/dpgate-token\n" + b, dir.path(), check),
              "conf: admin.token_file: line 2: file not found: /nonexistent/dpgate-token");
    EXPECT_EQ(errorOf("auth:\n  keys_file: ../keys.yaml\n" + b, dir.path(), check),
              "conf: auth.keys_file: line 2: file not found: " +
                  std::filesystem::path(dir.path()).parent_path().string() + "/keys.yaml");
    // Without file checks the same configs load: tests start local.yaml before setup fetched the tokenizer.
    EXPECT_EQ(errorOf("model:\n  tokenizer: nope.json\n" + b, dir.path()), "no error");
    EXPECT_EQ(errorOf("auth:\n  keys_file: keys.yaml\n" + b, dir.path()), "no error");
}

TEST(ConfigErrors, TlsNeedsBothFiles) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("listen:\n  tls:\n    cert: c.pem\n" + b),
              "conf: listen.tls.key: line 3: required when listen.tls.cert is set");
    EXPECT_EQ(errorOf("listen:\n  tls:\n    cert: c.pem\n    key: \"\"\n" + b),
              "conf: listen.tls.key: line 4: required when listen.tls.cert is set");
    EXPECT_EQ(errorOf("listen:\n  tls:\n    key: k.pem\n" + b),
              "conf: listen.tls.cert: line 3: required when listen.tls.key is set");
}

TEST(ConfigErrors, FileThatCannotBeRead) {
    try {
        loadConfigFile("/nonexistent/dpgate.yaml");
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_STREQ(e.what(), "conf: file not found: /nonexistent/dpgate.yaml");
        EXPECT_EQ(e.line(), 0);
    }
    TempDir dir;
    try {
        loadConfigFile(dir.path());
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_EQ(std::string(e.what()), "conf: not a regular file: " + dir.path());
    }
}

TEST(ConfigErrors, CarryKeyPathLineAndDetailSeparately) {
    try {
        loadConfigText("backends:\n  - {name: a, url: \"ftp://x\"}\n", ".", {.check_files = false});
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.key_path(), "backends[0].url");
        EXPECT_EQ(e.line(), 2);
        EXPECT_EQ(e.detail(), "expected http(s)://host:port");
    }
}

TEST(ConfigErrors, WorkBalanceFactorIsOffOrAtLeastOne) {
    const std::string b = minimal_backends;
    EXPECT_EQ(errorOf("routing:\n  work_balance_factor: 0.5\n" + b),
              "conf: routing.work_balance_factor: line 2: must be 0 (off) or between 1 and 100, got 0.5");
    EXPECT_EQ(errorOf("routing:\n  work_balance_factor: 0\n" + b), "no error");
    EXPECT_EQ(errorOf("routing:\n  work_balance_factor: 1.05\n" + b), "no error");
    EXPECT_EQ(errorOf("routing:\n  work_window_ms: 10\n" + b),
              "conf: routing.work_window_ms: line 2: must be between 1000 and 86400000 ms, got 10");
}

}  // namespace
}  // namespace dpgate::conf
