// The schema walk: YAML -> Config, one function per top-level section, then
// the checks that span sections. Sections are read in a fixed order whatever
// order the file uses, so the first error reported is deterministic.
#include "conf/auth_key_reader.hpp"
#include "conf/backend_url.hpp"
#include "conf/config.hpp"
#include "conf/keys_file.hpp"
#include "conf/sha256_hex.hpp"
#include "conf/yaml_reader.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <unordered_map>

namespace dpgate::conf {

namespace {

using namespace detail;

// A week. Longer is a typo, and the bound keeps deadline arithmetic
// (now + timeout in nanoseconds) far from overflow.
constexpr uint64_t max_timeout_ms = 7ull * 24 * 3600 * 1000;
constexpr uint64_t max_tokens = 1ull << 40;

// Where an absent key would have been: its path, at the line of its mapping.
Field missing(const MappingReader& mapping, std::string_view key) {
    return {childPath(mapping.self().path, key), mapping.self().node, mapping.self().line};
}

std::string formatNumber(double value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

bool isTokenChar(char c) {  // RFC 9110 tchar: what a header name may contain
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string resolvePath(const std::string& base_dir, const std::string& path) {
    if (path.empty()) return path;
    std::filesystem::path resolved(path);
    if (resolved.is_relative()) resolved = std::filesystem::path(base_dir) / resolved;
    std::string normal = resolved.lexically_normal().string();
    // "dir/." normalizes to "dir/"; messages and comparisons want "dir".
    if (normal.size() > 1 && normal.back() == '/') normal.pop_back();
    return normal;
}

class Loader {
public:
    Loader(std::string base_dir, const LoadOptions& options) : base_dir_(std::move(base_dir)), options_(options) {}

    Config load(const Field& root) {
        const MappingReader top(
            root, {"listen", "admin", "model", "limits", "routing", "health", "backends", "auth", "log", "metrics",
                   "state", "acceptance", "control", "threads", "admission_threads", "huge_pages"});
        if (auto f = top.get("listen")) readListen(*f);
        if (auto f = top.get("admin")) readAdmin(*f);
        checkListenersApart();
        if (auto f = top.get("model")) readModel(*f);
        if (auto f = top.get("limits")) readLimits(*f);
        if (auto f = top.get("routing")) readRouting(*f);
        if (auto f = top.get("health")) readHealth(*f);
        if (auto f = top.get("backends")) readBackends(*f);
        else fail(missing(top, "backends"), "at least one backend is required");
        if (auto f = top.get("auth")) readAuth(*f);
        if (auto f = top.get("log")) readLog(*f);
        if (auto f = top.get("metrics")) readMetrics(*f);
        if (auto f = top.get("state")) config_.state.dir = readDirectory(*f);
        if (auto f = top.get("acceptance")) config_.acceptance.dir = readDirectory(*f);
        if (auto f = top.get("control")) readControl(*f);
        if (auto f = top.get("threads")) config_.threads = static_cast<uint32_t>(readUint(*f, 0, 1024));
        if (auto f = top.get("admission_threads"))
            config_.admission_threads = static_cast<uint32_t>(readUint(*f, 0, 1024));
        if (auto f = top.get("huge_pages")) config_.huge_pages = readBool(*f);
        checkPrimaries();
        config_.shared_digest = sharedDigest(root.node);
        return std::move(config_);
    }

private:
    std::string readPath(const Field& field) { return resolvePath(base_dir_, readString(field)); }

    void requireFileOrDirectory(const Field& field, const std::string& path) {
        if (!options_.check_files || path.empty()) return;
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) fail(field, "file not found: " + path);
        if (std::filesystem::is_directory(path, ec) &&
            !std::filesystem::is_regular_file(std::filesystem::path(path) / "tokenizer.json", ec))
            fail(field, "no tokenizer.json in " + path);
    }

    void requireFile(const Field& field, const std::string& path) {
        if (!options_.check_files || path.empty()) return;
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) fail(field, "file not found: " + path);
        if (!std::filesystem::is_regular_file(path, ec)) fail(field, "not a regular file: " + path);
    }

    static std::string readAddress(const Field& field) {
        std::string address = readString(field);
        if (address.empty() || address.find_first_of(" \t/") != std::string::npos)
            fail(field, "expected a host name or an IP address, got \"" + address.substr(0, 40) + "\"");
        return address;
    }

    // 0 binds any free port, which tests use; the process logs the port it got.
    static uint16_t readListenPort(const Field& field) { return static_cast<uint16_t>(readUint(field, 0, 65535)); }

    void readListen(const Field& field) {
        const MappingReader m(field, {"address", "port", "tls"});
        ListenConfig& listen = config_.listen;
        if (auto f = m.get("address")) listen.address = readAddress(*f);
        if (auto f = m.get("port")) {
            listen.port = readListenPort(*f);
            listen_port_field_ = *f;
        }
        if (auto f = m.get("tls")) {
            const MappingReader tls(*f, {"cert", "key"});
            const std::optional<Field> cert = tls.get("cert");
            const std::optional<Field> key = tls.get("key");
            if (cert) listen.tls.cert = readPath(*cert);
            if (key) listen.tls.key = readPath(*key);
            if (!listen.tls.cert.empty() && listen.tls.key.empty())
                fail(key ? *key : missing(tls, "key"), "required when listen.tls.cert is set");
            if (listen.tls.cert.empty() && !listen.tls.key.empty())
                fail(cert ? *cert : missing(tls, "cert"), "required when listen.tls.key is set");
            if (cert) requireFile(*cert, listen.tls.cert);
            if (key) requireFile(*key, listen.tls.key);
        }
    }

    void readAdmin(const Field& field) {
        const MappingReader m(field, {"address", "port", "token", "token_file", "token_plain"});
        AdminConfig& admin = config_.admin;
        if (auto f = m.get("address")) admin.address = readAddress(*f);
        if (auto f = m.get("port")) {
            admin.port = readListenPort(*f);
            admin_port_field_ = *f;
        }

        std::optional<Field> first_source;
        auto countSource = [&](const Field& source) {
            if (first_source)
                fail(source, "give only one of admin.token, admin.token_file, admin.token_plain (" +
                                 first_source->path + " is set)");
            first_source = source;
        };
        static const std::string bad_token = "expected \"sha256:<64 hex digits>\" or {sha256: <64 hex digits>}";
        if (auto f = m.get("token")) {
            if (f->node.IsMap()) {
                const MappingReader token(*f, {"sha256"});
                const std::optional<Field> hash = token.get("sha256");
                if (!hash) fail(missing(token, "sha256"), "missing (required)");
                const std::optional<std::string> hex = normalizeSha256Hex(readString(*hash));
                if (!hex) fail(*hash, "expected 64 hex digits (the SHA-256 of the admin token)");
                admin.token_sha256 = *hex;
                countSource(*f);
            } else {
                if (!f->node.IsScalar()) fail(*f, bad_token);
                const std::string& text = f->node.Scalar();
                if (!text.empty()) {  // "" documents "no token" in dpgate.yaml
                    std::optional<std::string> hex;
                    if (text.starts_with("sha256:")) hex = normalizeSha256Hex(std::string_view(text).substr(7));
                    if (!hex) fail(*f, bad_token + " (a plain token belongs in token_file, or token_plain for demos)");
                    admin.token_sha256 = *hex;
                    countSource(*f);
                }
            }
        }
        if (auto f = m.get("token_file")) {
            admin.token_file = readPath(*f);
            if (!admin.token_file.empty()) {
                requireFile(*f, admin.token_file);
                countSource(*f);
            }
        }
        if (auto f = m.get("token_plain")) {
            const std::string plain = readString(*f);
            if (plain.empty()) fail(*f, "must not be empty");
            admin.token_sha256 = sha256Hex(plain);
            if (options_.admin_token_plain) *options_.admin_token_plain = plain;
            countSource(*f);
        }
    }

    // Two listeners on one port would fail at bind time, far from the config line that caused it.
    void checkListenersApart() const {
        const ListenConfig& listen = config_.listen;
        const AdminConfig& admin = config_.admin;
        const auto wildcard = [](const std::string& address) { return address == "0.0.0.0" || address == "::"; };
        const bool same_address =
            admin.address == listen.address || wildcard(admin.address) || wildcard(listen.address);
        if (admin.port == 0 || admin.port != listen.port || !same_address) return;
        if (admin_port_field_)
            fail(*admin_port_field_, "same port as listen.port (" + std::to_string(listen.port) + ")");
        fail(*listen_port_field_, "same port as admin.port (" + std::to_string(admin.port) + ")");
    }

    void readModel(const Field& field) {
        // model.template (a hand-written encoder in older configs): refused, naming where the template comes from.
        if (auto f = MappingReader::anyKeys(field).get("template")) {
            fail(*f,
                 "removed: the chat template is the model's own (the tokenizer_config.json beside model.tokenizer), "
                 "or a Jinja file given as model.chat_template");
        }
        const MappingReader m(
            field, {"id", "aliases", "window_tokens", "max_output_tokens", "image_reserve_tokens", "max_images",
                    "tokenizer", "chat_template", "chat_template_content_format", "count_cache_bytes"});
        ModelConfig& model = config_.model;
        if (auto f = m.get("id")) {
            model.id = readString(*f);
            if (model.id.empty()) fail(*f, "must not be empty");
        }
        if (auto f = m.get("aliases")) {
            for (const Field& item : readSequence(*f)) {
                std::string alias = readString(item);
                if (alias.empty()) fail(item, "must not be empty");
                if (alias == model.id) fail(item, "same as model.id");
                if (std::find(model.aliases.begin(), model.aliases.end(), alias) != model.aliases.end())
                    fail(item, "duplicate alias \"" + alias + "\"");
                model.aliases.push_back(std::move(alias));
            }
        }
        std::optional<Field> window = m.get("window_tokens");
        std::optional<Field> output = m.get("max_output_tokens");
        if (window) model.window_tokens = readUint(*window, 1, max_tokens);
        if (output) model.max_output_tokens = readUint(*output, 1, max_tokens);
        if (model.max_output_tokens > model.window_tokens) {
            if (output)
                fail(*output, "must not exceed model.window_tokens (" + std::to_string(model.window_tokens) +
                                  "), got " + std::to_string(model.max_output_tokens));
            fail(*window, "must be at least model.max_output_tokens (" + std::to_string(model.max_output_tokens) +
                              "), got " + std::to_string(model.window_tokens));
        }
        if (auto f = m.get("image_reserve_tokens")) model.image_reserve_tokens = readUint(*f, 0, max_tokens);
        if (auto f = m.get("max_images")) model.max_images = readUint(*f, 0, 1'000'000);
        if (auto f = m.get("tokenizer")) {
            model.tokenizer = readPath(*f);
            requireFileOrDirectory(*f, model.tokenizer);
        }
        if (auto f = m.get("chat_template")) {
            model.chat_template = readPath(*f);
            requireFile(*f, model.chat_template);
        }
        if (auto f = m.get("chat_template_content_format")) {
            model.chat_template_content_format = readString(*f);
            const std::string& v = model.chat_template_content_format;
            if (v != "auto" && v != "string" && v != "openai")
                fail(*f, "expected auto, string or openai, got \"" + v.substr(0, 40) + "\"");
        }
        if (auto f = m.get("count_cache_bytes")) model.count_cache_bytes = readBytes(*f, 1ull << 20, 1ull << 40);
    }

    void readLimits(const Field& field) {
        const MappingReader m(field, {"max_body_bytes",
                                      "max_header_bytes",
                                      "max_header_count",
                                      "max_connections",
                                      "header_timeout_ms",
                                      "body_idle_timeout_ms",
                                      "keepalive_timeout_ms",
                                      "upstream_connect_timeout_ms",
                                      "upstream_first_byte_timeout_ms",
                                      "stream_idle_timeout_ms",
                                      "client_write_timeout_ms",
                                      "upstream_max_idle_connections",
                                      "upstream_idle_timeout_ms",
                                      "relay_buffer_bytes",
                                      "drain_timeout_ms",
                                      "offload_admission_bytes",
                                      "max_json_depth",
                                      "max_n",
                                      "max_buffered_body_bytes",
                                      "max_connections_per_ip",
                                      "linger_timeout_ms",
                                      "key_defaults",
                                      "redis",
                                      "on_store_unavailable"});
        LimitsConfig& limits = config_.limits;
        if (auto f = m.get("max_body_bytes")) limits.max_body_bytes = readBytes(*f, 1, 1ull << 40);
        if (auto f = m.get("max_header_bytes")) limits.max_header_bytes = readBytes(*f, 1024, 64ull << 20);
        if (auto f = m.get("max_header_count"))
            limits.max_header_count = static_cast<uint32_t>(readUint(*f, 1, 100'000));
        if (auto f = m.get("max_connections"))
            limits.max_connections = static_cast<uint32_t>(readUint(*f, 1, 10'000'000));
        const std::pair<const char*, uint64_t LimitsConfig::*> timeouts[] = {
            {"header_timeout_ms", &LimitsConfig::header_timeout_ms},
            {"body_idle_timeout_ms", &LimitsConfig::body_idle_timeout_ms},
            {"keepalive_timeout_ms", &LimitsConfig::keepalive_timeout_ms},
            {"upstream_connect_timeout_ms", &LimitsConfig::upstream_connect_timeout_ms},
            {"upstream_first_byte_timeout_ms", &LimitsConfig::upstream_first_byte_timeout_ms},
            {"stream_idle_timeout_ms", &LimitsConfig::stream_idle_timeout_ms},
            {"client_write_timeout_ms", &LimitsConfig::client_write_timeout_ms},
            {"upstream_idle_timeout_ms", &LimitsConfig::upstream_idle_timeout_ms},
        };
        for (const auto& [key, member] : timeouts)
            if (auto f = m.get(key)) limits.*member = readDurationMs(*f, 1, max_timeout_ms);
        if (auto f = m.get("upstream_max_idle_connections"))
            limits.upstream_max_idle_connections = readUint(*f, 0, 100'000);
        if (auto f = m.get("relay_buffer_bytes")) limits.relay_buffer_bytes = readBytes(*f, 1024, 1ull << 30);
        // 0 = exit at once on SIGTERM.
        if (auto f = m.get("drain_timeout_ms")) limits.drain_timeout_ms = readDurationMs(*f, 0, max_timeout_ms);
        if (auto f = m.get("offload_admission_bytes")) limits.offload_admission_bytes = readBytes(*f, 0, 1ull << 40);
        if (auto f = m.get("max_json_depth")) limits.max_json_depth = static_cast<uint32_t>(readUint(*f, 2, 1000));
        if (auto f = m.get("max_n")) limits.max_n = static_cast<uint32_t>(readUint(*f, 1, 128));
        if (auto f = m.get("max_connections_per_ip"))
            limits.max_connections_per_ip = static_cast<uint32_t>(readUint(*f, 0, 10'000'000));
        if (auto f = m.get("linger_timeout_ms")) limits.linger_timeout_ms = readDurationMs(*f, 0, max_timeout_ms);
        if (auto f = m.get("max_buffered_body_bytes")) {
            limits.max_buffered_body_bytes = readBytes(*f, 1, 1ull << 44);
            if (limits.max_buffered_body_bytes < limits.max_body_bytes)
                fail(*f, "must be at least limits.max_body_bytes (" + std::to_string(limits.max_body_bytes) + ")");
        } else if (limits.max_buffered_body_bytes < limits.max_body_bytes) {
            limits.max_buffered_body_bytes = limits.max_body_bytes;
        }
        if (auto f = m.get("key_defaults")) {
            const MappingReader d(
                *f, {"max_concurrent", "requests_per_min", "requests_per_day", "tokens_per_min", "tokens_per_day"});
            readKeyLimits(d, limits.key_defaults);
        }
        if (auto f = m.get("redis")) readRedis(*f);
        if (auto f = m.get("on_store_unavailable")) {
            const std::string mode = readString(*f);
            if (mode == "local") limits.on_store_unavailable = StoreFallback::local;
            else if (mode == "deny") limits.on_store_unavailable = StoreFallback::deny;
            else fail(*f, "expected local or deny, got \"" + mode.substr(0, 40) + "\"");
        }
    }

    void readRedis(const Field& field) {
        const MappingReader m(
            field, {"address", "username", "password_file", "tls", "key_prefix", "connect_timeout_ms", "timeout_ms"});
        RedisConfig& redis = config_.limits.redis;
        const std::optional<Field> address = m.get("address");
        if (!address) fail(missing(m, "address"), "required: host:port of the Redis server");
        redis.address = readString(*address);
        const size_t colon = redis.address.rfind(':');
        uint64_t port = 0;
        const bool numeric = colon != std::string::npos && colon + 1 < redis.address.size() &&
                             redis.address.size() - colon - 1 <= 5 &&
                             std::all_of(redis.address.begin() + long(colon) + 1, redis.address.end(),
                                         [](char c) { return c >= '0' && c <= '9'; });
        if (numeric) port = std::stoull(redis.address.substr(colon + 1));
        if (!numeric || colon == 0 || port == 0 || port > 65535)
            fail(*address, "expected host:port, got \"" + redis.address.substr(0, 80) + "\"");
        if (auto f = m.get("username")) redis.username = readString(*f);
        if (auto f = m.get("password_file")) {
            redis.password_file = readPath(*f);
            requireFile(*f, redis.password_file);
        }
        if (!redis.username.empty() && redis.password_file.empty()) fail(m.self(), "username needs password_file");
        if (auto f = m.get("tls")) {
            redis.tls = true;
            if (!f->node.IsNull()) {
                const MappingReader tls(*f, {"ca_file", "cert_file", "key_file"});
                if (auto g = tls.get("ca_file")) requireFile(*g, redis.ca_file = readPath(*g));
                if (auto g = tls.get("cert_file")) requireFile(*g, redis.cert_file = readPath(*g));
                if (auto g = tls.get("key_file")) requireFile(*g, redis.key_file = readPath(*g));
                if (redis.cert_file.empty() != redis.key_file.empty()) fail(*f, "cert_file and key_file go together");
            }
        }
        if (auto f = m.get("key_prefix")) {
            redis.key_prefix = readString(*f);
            if (redis.key_prefix.size() > 128) fail(*f, "at most 128 characters");
        }
        if (auto f = m.get("connect_timeout_ms")) redis.connect_timeout_ms = readDurationMs(*f, 10, 600'000);
        if (auto f = m.get("timeout_ms")) redis.timeout_ms = readDurationMs(*f, 1, 600'000);
    }

    void readRouting(const Field& field) {
        const MappingReader m(field, {"mode", "session_header", "balance_factor", "work_balance_factor",
                                      "work_slack_tokens", "work_window_ms", "failover_requires_acceptance"});
        RoutingConfig& routing = config_.routing;
        if (auto f = m.get("mode")) {
            const std::string mode = readString(*f);
            if (mode == "failover") routing.mode = RoutingMode::failover;
            else if (mode == "active-active") routing.mode = RoutingMode::active_active;
            else fail(*f, "expected failover or active-active, got \"" + mode.substr(0, 40) + "\"");
        }
        if (auto f = m.get("session_header")) {
            routing.session_header = readString(*f);
            if (routing.session_header.empty() ||
                !std::all_of(routing.session_header.begin(), routing.session_header.end(), isTokenChar))
                fail(*f, "expected an HTTP header name");
        }
        if (auto f = m.get("balance_factor")) {
            routing.balance_factor = readDouble(*f);
            if (routing.balance_factor < 1 || routing.balance_factor > 100)
                fail(*f, "must be between 1 and 100, got " + formatNumber(routing.balance_factor));
        }
        if (auto f = m.get("work_balance_factor")) {
            routing.work_balance_factor = readDouble(*f);
            if (routing.work_balance_factor != 0 &&
                (routing.work_balance_factor < 1 || routing.work_balance_factor > 100))
                fail(*f, "must be 0 (off) or between 1 and 100, got " + formatNumber(routing.work_balance_factor));
        }
        if (auto f = m.get("work_slack_tokens")) routing.work_slack_tokens = readUint(*f, 0, 1ull << 40);
        if (auto f = m.get("work_window_ms")) routing.work_window_ms = readDurationMs(*f, 1000, 86'400'000);
        if (auto f = m.get("failover_requires_acceptance")) routing.failover_requires_acceptance = readBool(*f);
    }

    // `{dir: PATH}`: a folder dpgate writes into. It need not exist yet
    // (dpgate creates it); an existing non-folder is refused.
    std::string readDirectory(const Field& field) {
        const MappingReader m(field, {"dir"});
        std::optional<Field> f = m.get("dir");
        if (!f) return {};
        std::string dir = readPath(*f);
        std::error_code ec;
        if (options_.check_files && !dir.empty() && std::filesystem::exists(dir, ec) &&
            !std::filesystem::is_directory(dir, ec))
            fail(*f, "not a folder: " + dir);
        return dir;
    }

    void readHealth(const Field& field) {
        const MappingReader m(field, {"interval_ms", "timeout_ms", "fall", "rise"});
        HealthConfig& health = config_.health;
        if (auto f = m.get("interval_ms")) health.interval_ms = readDurationMs(*f, 1, max_timeout_ms);
        if (auto f = m.get("timeout_ms")) health.timeout_ms = readDurationMs(*f, 1, max_timeout_ms);
        if (auto f = m.get("fall")) health.fall = static_cast<uint32_t>(readUint(*f, 1, 1000));
        if (auto f = m.get("rise")) health.rise = static_cast<uint32_t>(readUint(*f, 1, 1000));
    }

    void readBackends(const Field& field) {
        backends_field_ = field;
        const std::vector<Field> items = readSequence(field);
        if (items.empty()) fail(field, "at least one backend is required");
        std::unordered_map<std::string, std::size_t> backend_by_name;
        std::unordered_map<std::string, std::size_t> backend_by_address;
        for (const Field& item : items) {
            const MappingReader m(item, {"name", "url", "role", "dp_ranks", "credential_env"});
            BackendConfig backend;
            const std::optional<Field> name = m.get("name");
            if (!name) fail(missing(m, "name"), "missing (required)");
            backend.name = readString(*name);
            const bool valid_name = !backend.name.empty() && backend.name.size() <= 64 &&
                                    std::all_of(backend.name.begin(), backend.name.end(), [](char c) {
                                        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                               (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
                                    });
            // The name is a metrics label and a path segment (/backends/{name}/metrics).
            if (!valid_name) fail(*name, "backend name must be 1-64 characters of [A-Za-z0-9._-]");
            // Looked up, not searched: a file of many entries loads in linear time.
            if (auto [at, added] = backend_by_name.try_emplace(backend.name, config_.backends.size()); !added)
                fail(*name, "duplicate backend name \"" + backend.name + "\" (also " +
                                indexPath(field.path, at->second) + ")");

            const std::optional<Field> url = m.get("url");
            if (!url) fail(missing(m, "url"), "missing (required)");
            backend.url = readString(*url);
            const std::optional<BackendUrl> parsed = parseBackendUrl(backend.url);
            if (!parsed) fail(*url, "expected http(s)://host:port");
            backend.scheme = parsed->scheme;
            backend.host = parsed->host;
            backend.port = parsed->port;
            const std::string address = backend.scheme + "://" + backend.host + ":" + std::to_string(backend.port);
            if (auto [at, added] = backend_by_address.try_emplace(address, config_.backends.size()); !added)
                fail(*url, "same address as " + indexPath(field.path, at->second));

            const std::optional<Field> role = m.get("role");
            if (role) {
                const std::string text = readString(*role);
                if (text == "primary") backend.role = BackendRole::primary;
                else if (text == "standby") backend.role = BackendRole::standby;
                else fail(*role, "expected primary or standby, got \"" + text.substr(0, 40) + "\"");
            }
            role_fields_.push_back(role ? *role : missing(m, "role"));

            if (auto f = m.get("dp_ranks")) backend.dp_ranks = static_cast<uint32_t>(readUint(*f, 1, 1024));
            if (auto f = m.get("credential_env")) {
                backend.credential_env = readString(*f);
                const std::string& env = backend.credential_env;
                const bool valid_env =
                    env.empty() ||
                    ((!(env[0] >= '0' && env[0] <= '9')) && std::all_of(env.begin(), env.end(), [](char c) {
                         return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
                     }));
                if (!valid_env) fail(*f, "expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
            }
            config_.backends.push_back(std::move(backend));
        }
    }

    // Failover sends everything to the one primary; a second one would leave
    // the choice to file order, which nobody reviewing a config would see.
    void checkPrimaries() {
        if (config_.routing.mode != RoutingMode::failover) return;
        std::optional<std::size_t> first_primary;
        for (std::size_t i = 0; i < config_.backends.size(); ++i) {
            if (config_.backends[i].role != BackendRole::primary) continue;
            if (first_primary)
                fail(role_fields_[i], "routing.mode failover allows one primary; " +
                                          indexPath(backends_field_.path, *first_primary) + " is already primary");
            first_primary = i;
        }
        if (!first_primary) fail(backends_field_, "routing.mode failover needs one backend with role primary");
    }

    void readAuth(const Field& field) {
        const MappingReader m(field, {"required", "keys_file", "keys"});
        AuthConfig& auth = config_.auth;
        if (auto f = m.get("required")) auth.required = readBool(*f);
        // Looked up, not searched: a keys file of thousands of users loads in linear time.
        std::unordered_map<std::string, std::size_t> key_by_name;
        std::unordered_map<std::string, std::size_t> key_by_hash;
        if (auto f = m.get("keys")) {
            for (const Field& item : readSequence(*f)) {
                const MappingReader entry(
                    item, {"name", "sha256", "key", "trusted", "max_concurrent", "requests_per_min", "requests_per_day",
                           "tokens_per_min", "tokens_per_day", "metrics"});
                const std::optional<Field> name = entry.get("name");
                if (!name) fail(missing(entry, "name"), "missing (required)");
                std::string key_name = readString(*name);
                checkKeyName(*name, key_name);
                if (auto [at, added] = key_by_name.try_emplace(key_name, auth.keys.size()); !added)
                    fail(*name,
                         "duplicate key name \"" + key_name + "\" (also " + indexPath(f->path, at->second) + ")");
                AuthKey key = readAuthKey(entry, std::move(key_name), true, config_.limits.key_defaults);
                if (auto [at, added] = key_by_hash.try_emplace(key.sha256, auth.keys.size()); !added)
                    fail(entry.self(),
                         "same key as " + indexPath(f->path, at->second) + " (\"" + auth.keys[at->second].name + "\")");
                auth.keys.push_back(std::move(key));
            }
        }
        if (auto f = m.get("keys_file")) {
            auth.keys_file = readPath(*f);
            if (!auth.keys_file.empty() && options_.check_files) {
                const std::string text = readTextFile(auth.keys_file, *f);
                for (AuthKey& key : parseKeysText(text, auth.keys_file, config_.limits.key_defaults)) {
                    if (!key_by_name.try_emplace(key.name, auth.keys.size()).second)
                        fail(*f, "key name \"" + key.name + "\" is defined twice (auth.keys or the keys file)");
                    if (auto [at, added] = key_by_hash.try_emplace(key.sha256, auth.keys.size()); !added)
                        fail(*f,
                             "keys \"" + auth.keys[at->second].name + "\" and \"" + key.name + "\" have the same hash");
                    auth.keys.push_back(std::move(key));
                }
            }
        }
    }

    void readLog(const Field& field) {
        const MappingReader m(field, {"access", "level"});
        LogConfig& log = config_.log;
        if (auto f = m.get("access")) {
            const std::string access = readString(*f);
            if (access.empty()) fail(*f, "expected stdout, stderr, off or a file path");
            log.access =
                (access == "stdout" || access == "stderr" || access == "off") ? access : resolvePath(base_dir_, access);
        }
        if (auto f = m.get("level")) {
            log.level = readString(*f);
            if (log.level != "error" && log.level != "warn" && log.level != "info" && log.level != "debug")
                fail(*f, "expected error, warn, info or debug, got \"" + log.level.substr(0, 40) + "\"");
        }
    }

    void readControl(const Field& field) {
        const MappingReader m(field, {"replica_id", "etcd"});
        ControlConfig& control = config_.control;
        if (auto f = m.get("replica_id")) {
            control.replica_id = readString(*f);
            if (control.replica_id.empty() || control.replica_id.size() > 128 ||
                control.replica_id.find_first_of("/ \t\n") != std::string::npos)
                fail(*f, "expected 1 to 128 characters without '/' or spaces");
        }
        std::optional<Field> etcd_field = m.get("etcd");
        if (!etcd_field) return;
        const MappingReader e(*etcd_field, {"endpoints", "prefix", "username", "password_file", "tls",
                                            "dial_timeout_ms", "request_timeout_ms", "lease_ttl_s"});
        EtcdConfig& etcd = control.etcd;
        std::optional<Field> endpoints = e.get("endpoints");
        if (!endpoints) fail(missing(e, "endpoints"), "at least one etcd endpoint is required");
        for (const Field& item : readSequence(*endpoints)) {
            std::string url = readString(item);
            if (!parseBackendUrl(url)) fail(item, "expected http(s)://host:port, got \"" + url.substr(0, 80) + "\"");
            etcd.endpoints.push_back(std::move(url));
        }
        if (etcd.endpoints.empty()) fail(*endpoints, "at least one etcd endpoint is required");
        if (auto f = e.get("prefix")) {
            etcd.prefix = readString(*f);
            if (etcd.prefix.empty() || etcd.prefix.front() != '/' || etcd.prefix.back() != '/' ||
                etcd.prefix.size() > 256)
                fail(*f, "expected a key prefix starting and ending with '/', like /dpgate/");
        }
        if (auto f = e.get("username")) etcd.username = readString(*f);
        if (auto f = e.get("password_file")) {
            etcd.password_file = readPath(*f);
            requireFile(*f, etcd.password_file);
        }
        if (etcd.username.empty() != etcd.password_file.empty())
            fail(*etcd_field, "username and password_file go together");
        if (auto f = e.get("tls")) {
            const MappingReader tls(*f, {"ca_file", "cert_file", "key_file"});
            if (auto g = tls.get("ca_file")) requireFile(*g, etcd.ca_file = readPath(*g));
            if (auto g = tls.get("cert_file")) requireFile(*g, etcd.cert_file = readPath(*g));
            if (auto g = tls.get("key_file")) requireFile(*g, etcd.key_file = readPath(*g));
            if (etcd.cert_file.empty() != etcd.key_file.empty()) fail(*f, "cert_file and key_file go together");
        }
        if (auto f = e.get("dial_timeout_ms")) etcd.dial_timeout_ms = readDurationMs(*f, 10, 600'000);
        if (auto f = e.get("request_timeout_ms")) etcd.request_timeout_ms = readDurationMs(*f, 10, 600'000);
        if (auto f = e.get("lease_ttl_s")) etcd.lease_ttl_s = readUint(*f, 2, 3600);
    }

    // The YAML without what differs between replicas by design.
    static std::string sharedDigest(const YAML::Node& root) {
        YAML::Node copy = YAML::Clone(root);
        if (!copy.IsMap()) return sha256Hex(YAML::Dump(copy));
        for (const char* key : {"listen", "state", "log"}) copy.remove(key);
        if (copy["admin"].IsMap()) {
            copy["admin"].remove("address");
            copy["admin"].remove("port");
        }
        if (copy["control"].IsMap()) copy["control"].remove("replica_id");
        // A section left empty reads as one never written.
        for (const char* key : {"admin", "control"})
            if (copy[key].IsMap() && copy[key].size() == 0) copy.remove(key);
        return sha256Hex(YAML::Dump(copy));
    }

    void readMetrics(const Field& field) {
        const MappingReader m(field, {"enabled", "stream_usage"});
        if (auto f = m.get("enabled")) config_.metrics.enabled = readBool(*f);
        if (auto f = m.get("stream_usage")) config_.metrics.stream_usage = readBool(*f);
    }

    std::string base_dir_;
    LoadOptions options_;
    Config config_;
    Field backends_field_;
    std::optional<Field> listen_port_field_;
    std::optional<Field> admin_port_field_;
    std::vector<Field> role_fields_;  // per backend: its role, or where it would be
};

}  // namespace

Config loadConfigText(const std::string& yaml_text, const std::string& base_dir, const LoadOptions& options) {
    try {
        return Loader(base_dir, options).load(parseDocument(yaml_text));
    } catch (const YAML::Exception& e) {
        // Node access should never throw once types are checked; if it does,
        // it is still a config error, not a crash.
        throw ConfigError("", e.mark.line >= 0 ? e.mark.line + 1 : 0, "invalid YAML: " + e.msg);
    }
}

Config loadConfigText(const std::string& yaml_text, const std::string& base_dir) {
    return loadConfigText(yaml_text, base_dir, LoadOptions{});
}

Config loadConfigFile(const std::string& path, const LoadOptions& options) {
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    if (ec) absolute = path;
    absolute = absolute.lexically_normal();
    const std::string text = readTextFile(absolute.string(), {"", YAML::Node(), 0});
    Config config = loadConfigText(text, absolute.parent_path().string(), options);
    config.source_path = absolute.string();
    return config;
}

Config loadConfigFile(const std::string& path) { return loadConfigFile(path, LoadOptions{}); }

}  // namespace dpgate::conf
