// The typed, validated configuration of one dpgate process.
//
// conf/ is pure: it turns YAML text into a Config or a ConfigError and never
// touches a socket. Every default lives here, once; conf/examples/dpgate.yaml
// documents the same values (a unit test keeps the two in step).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dpgate::conf {

struct TlsConfig {
    std::string cert;  // PEM file; empty = plain HTTP
    std::string key;
    bool enabled() const { return !cert.empty(); }

    bool operator==(const TlsConfig&) const = default;
};

struct ListenConfig {
    std::string address = "127.0.0.1";
    uint16_t port = 8900;
    TlsConfig tls;

    bool operator==(const ListenConfig&) const = default;
};

struct AdminConfig {
    std::string address = "127.0.0.1";
    uint16_t port = 8901;
    // Exactly one of token_sha256 / token_file may be set. The YAML key
    // `token` takes "sha256:<64 hex>"; `token_file` names a file holding the
    // plain token. Plain tokens are never kept in the Config.
    // Also accepted: `token: {sha256: HEX}`, and `token_plain: VALUE` for
    // demo configs only (stored here as its SHA-256).
    std::string token_sha256;  // lowercase hex, 64 chars; empty = none
    std::string token_file;

    bool operator==(const AdminConfig&) const = default;
};

struct ModelConfig {
    std::string id = "ds-v4.1-flash-1017";
    std::vector<std::string> aliases;
    uint64_t window_tokens = 1048576;
    uint64_t max_output_tokens = 32768;
    uint64_t image_reserve_tokens = 1024;
    uint64_t max_images = 640;
    std::string tokenizer;  // an HF tokenizer.json or its directory; empty = none
    // A Jinja chat template (vLLM's --chat-template); empty: the one beside
    // the tokenizer (chat_template.jinja or tokenizer_config.json's).
    std::string chat_template;
    std::string chat_template_content_format = "auto";  // auto | string | openai
    // Bound on the token count caches (word and segment) of all workers
    // together: half for the segment cache they share, half split among their own.
    uint64_t count_cache_bytes = 256ull << 20;

    bool operator==(const ModelConfig&) const = default;
};

struct AuthKey {
    std::string name;
    std::string sha256;  // lowercase hex of the key
    bool trusted = false;
    uint32_t max_concurrent = 0;    // 0 = unlimited
    uint32_t requests_per_min = 0;  // 0 = unlimited
    bool metrics = false;           // may read GET /metrics on the client port
    // Budgets (0 = unlimited). Minutes are token buckets, days are UTC
    // calendar days (docs/operations.md, "Budgets per key").
    uint32_t requests_per_day = 0;
    uint64_t tokens_per_min = 0;
    uint64_t tokens_per_day = 0;

    bool budgeted() const { return requests_per_min || requests_per_day || tokens_per_min || tokens_per_day; }
    bool operator==(const AuthKey&) const = default;
};

// Redis, where replicas share the keys' budgets (gateway/redis/). Without an
// address every replica keeps its own.
struct RedisConfig {
    std::string address;        // "host:port"
    std::string username;       // AUTH username password (Redis 6 ACL); empty: the default user
    std::string password_file;  // the password, one line; empty: no AUTH
    bool tls = false;           // `tls:` given (a mapping, maybe empty)
    std::string ca_file;        // tls.ca_file: PEM; empty = the system's
    std::string cert_file;      // tls.cert_file/key_file: a client certificate
    std::string key_file;
    std::string key_prefix = "dpgate:";  // every Redis key dpgate writes starts with it
    uint64_t connect_timeout_ms = 1000;
    // One command's round trip; beyond it the store counts as away for
    // that request (limits.on_store_unavailable decides).
    uint64_t timeout_ms = 250;
    bool enabled() const { return !address.empty(); }

    bool operator==(const RedisConfig&) const = default;
};

// While Redis cannot be reached: `local` enforces each replica's share of
// every budget in the process; `deny` refuses budgeted keys with 503.
enum class StoreFallback { local, deny };

struct LimitsConfig {
    uint64_t max_body_bytes = 256ull * 1024 * 1024;
    uint64_t max_header_bytes = 64 * 1024;
    uint32_t max_header_count = 100;
    uint32_t max_connections = 10000;
    uint64_t header_timeout_ms = 10000;     // the whole header, from the first byte wait
    uint64_t body_idle_timeout_ms = 30000;  // between body reads
    uint64_t keepalive_timeout_ms = 60000;  // idle connection between requests
    uint64_t upstream_connect_timeout_ms = 5000;
    uint64_t upstream_first_byte_timeout_ms = 30 * 60 * 1000;  // a 1M-token prefill takes minutes
    uint64_t stream_idle_timeout_ms = 5 * 60 * 1000;           // between upstream chunks
    uint64_t client_write_timeout_ms = 60000;                  // a client that stops draining
    uint64_t upstream_max_idle_connections = 256;              // per backend, all workers together
    uint64_t upstream_idle_timeout_ms =
        4000;                                 // retire idle upstream connections before the backend does (uvicorn: 5 s)
    uint64_t relay_buffer_bytes = 64 * 1024;  // per direction per request
    uint64_t drain_timeout_ms = 30000;        // SIGTERM: in-flight requests get this long
    // A body this large is admitted (scanned and counted) on its worker's
    // admission thread, not the worker's own: a cold count of megabytes takes
    // tens of ms, and the worker's other streams keep flowing meanwhile. 0:
    // every request is admitted on the worker.
    uint64_t offload_admission_bytes = 128 * 1024;
    // What a hostile client meets (docs/operations.md lists them all):
    // JSON nesting in a request body; deeper -> 400 naming the field path.
    // Real tool schemas nest tens of levels; vLLM's Python parser gives up near 1,000.
    uint32_t max_json_depth = 256;
    // Completions asked for at once (`n`); the output budget counts n times.
    uint32_t max_n = 8;
    // Request bodies buffered by the whole process at once; a body that
    // would go beyond gets 503 before it is read (at least max_body_bytes).
    uint64_t max_buffered_body_bytes = 1ull << 30;
    // Open client connections from one address (0 = no cap). Tunnelled
    // clients (ssh -L) all arrive from 127.0.0.1 and share it.
    uint32_t max_connections_per_ip = 4096;
    // After an early refusal (401, 413) the rest of the body is read and
    // discarded for at most this long, so the client reads the answer
    // instead of a reset (nginx's lingering close).
    uint64_t linger_timeout_ms = 5000;
    // The limits and budgets of every key that does not set its own
    // (auth.keys and the keys file override them field by field).
    AuthKey key_defaults;
    RedisConfig redis;
    StoreFallback on_store_unavailable = StoreFallback::local;

    bool operator==(const LimitsConfig&) const = default;
};

enum class RoutingMode { failover, active_active };

struct RoutingConfig {
    RoutingMode mode = RoutingMode::failover;
    std::string session_header = "X-Session-ID";
    double balance_factor = 1.25;
    // New conversations avoid a rank whose recent prefill work is above this
    // x the mean + work_slack_tokens (0 = off); "recent" decays over
    // work_window_ms. See routing/slot_chooser.hpp.
    double work_balance_factor = 1.0;
    uint64_t work_slack_tokens = 16384;
    uint64_t work_window_ms = 300'000;
    // Failover to a standby that has no passing acceptance record matching
    // what it reports now: false = allowed, logged and shown loudly in
    // /admin/status; true = the standby takes no traffic (clients get 503).
    bool failover_requires_acceptance = false;

    bool operator==(const RoutingConfig&) const = default;
};

struct HealthConfig {
    uint64_t interval_ms = 2000;
    uint64_t timeout_ms = 1000;
    uint32_t fall = 3;
    uint32_t rise = 2;

    bool operator==(const HealthConfig&) const = default;
};

enum class BackendRole { primary, standby };

struct BackendConfig {
    std::string name;
    std::string url;     // as written: http(s)://host:port
    std::string scheme;  // "http" | "https"
    std::string host;
    uint16_t port = 0;
    BackendRole role = BackendRole::primary;
    uint32_t dp_ranks = 8;
    std::string credential_env;  // optional: env var holding a bearer token for the backend

    bool operator==(const BackendConfig&) const = default;
};

struct AuthConfig {
    bool required = true;
    std::string keys_file;      // YAML file of `name: {sha256, trusted, ...}` or `name: <hash>`
    std::vector<AuthKey> keys;  // inline keys (demo); keys_file entries are appended at load

    bool operator==(const AuthConfig&) const = default;
};

struct LogConfig {
    std::string access = "stdout";  // stdout | off | PATH
    std::string level = "info";     // error | warn | info | debug

    bool operator==(const LogConfig&) const = default;
};

struct MetricsConfig {
    bool enabled = true;  // false: nothing is recorded on the hot path, /metrics answers 404
    // A stream whose client did not ask for stream_options.include_usage is
    // sent upstream with it, so its tokens are counted; dpgate removes the
    // extra usage chunk before the client sees it.
    bool stream_usage = true;

    bool operator==(const MetricsConfig&) const = default;
};

// Where dpgate keeps what must survive a restart: the roles, the drained
// set and the last flips (state.json). Empty: nothing is persisted.
struct StateConfig {
    std::string dir;

    bool operator==(const StateConfig&) const = default;
};

// Where `dpgate accept` writes its records and where the gateway reads them
// (flips and the public window are guarded by them).
struct AcceptanceConfig {
    std::string dir;

    bool operator==(const AcceptanceConfig&) const = default;
};

// etcd, where replicas share their roles (gateway/control/). The client
// speaks etcd's v3 JSON gateway over HTTP/1.1, TLS for https endpoints.
struct EtcdConfig {
    std::vector<std::string> endpoints;  // "http(s)://host:port", tried in turn
    std::string prefix = "/dpgate/";     // every key dpgate writes starts with it
    std::string username;                // empty: no authentication
    std::string password_file;           // the password, one line
    std::string ca_file;                 // tls.ca_file: PEM; empty = the system's
    std::string cert_file;               // tls.cert_file/key_file: a client certificate
    std::string key_file;
    uint64_t dial_timeout_ms = 2000;     // connect (and TLS handshake) to one endpoint
    uint64_t request_timeout_ms = 5000;  // one request, endpoints tried included
    uint64_t lease_ttl_s = 5;            // a replica's membership key outlives it by this

    bool operator==(const EtcdConfig&) const = default;
};

// Replicas acting as one: with etcd endpoints, the roles, the drained set,
// the flips and the acceptance verdicts live in etcd; without, in state.dir.
struct ControlConfig {
    std::string replica_id;  // empty: "<host name>:<listen port>"
    EtcdConfig etcd;
    bool shared() const { return !etcd.endpoints.empty(); }

    bool operator==(const ControlConfig&) const = default;
};

struct Config {
    ListenConfig listen;
    AdminConfig admin;
    ModelConfig model;
    LimitsConfig limits;
    RoutingConfig routing;
    HealthConfig health;
    std::vector<BackendConfig> backends;
    AuthConfig auth;
    LogConfig log;
    MetricsConfig metrics;
    StateConfig state;
    AcceptanceConfig acceptance;
    ControlConfig control;
    uint32_t threads = 0;  // 0 = one per core
    // Threads that admit large bodies (limits.offload_admission_bytes and
    // more) off the workers; 0 = as many as `threads`, at least 2.
    uint32_t admission_threads = 0;
    bool huge_pages = true;   // the heap in transparent huge pages (gateway/platform/heap_pages.hpp)
    std::string source_path;  // the file it was loaded from (for reload)
    // sha256 of the YAML without what differs between replicas of one
    // deployment by design (listen, admin's address and port, state, log,
    // control.replica_id): replicas that agree on everything else share it.
    std::string shared_digest;

    bool operator==(const Config&) const = default;
};

// "conf: backends[1].url: line 14: expected http(s)://host:port"
// line is 1-based; 0 = no line (e.g. the file cannot be read), and the
// "line N: " part is then left out, as is an empty key path. Errors in the
// keys file carry "<keys file path>: <key path>" as their key path.
class ConfigError : public std::runtime_error {
public:
    ConfigError(std::string key_path, int line, const std::string& what);
    const std::string& key_path() const { return key_path_; }
    int line() const { return line_; }
    // The message without the "conf: <path>: line N: " prefix.
    const std::string& detail() const { return detail_; }

private:
    std::string key_path_;
    int line_;
    std::string detail_;
};

// Parses and validates; throws ConfigError. Relative paths in the file
// (tokenizer, tls, keys_file, token_file, log.access, state.dir,
// acceptance.dir) resolve against the
// file's folder (loadConfigText: against base_dir).
Config loadConfigFile(const std::string& path);
Config loadConfigText(const std::string& yaml_text, const std::string& base_dir = ".");

struct LoadOptions {
    // false: the loader never touches the filesystem. Paths are still
    // resolved, but nothing is checked for existence and auth.keys_file is
    // not read (its keys are then absent). For tests that load the examples
    // before scripts/setup has fetched the tokenizer, and for the fuzzer.
    bool check_files = true;
    // When set, receives a demo config's plain `admin.token_plain` (the
    // Config keeps only its hash): `dpgate ctl --config` on the same machine.
    std::string* admin_token_plain = nullptr;
};

Config loadConfigFile(const std::string& path, const LoadOptions& options);
Config loadConfigText(const std::string& yaml_text, const std::string& base_dir, const LoadOptions& options);

const char* toString(BackendRole role);
const char* toString(RoutingMode mode);

}  // namespace dpgate::conf
