#include "gateway/ops/ctl_cli.hpp"

#include "conf/backend_url.hpp"
#include "conf/config.hpp"
#include "gateway/backends/health_checker.hpp"
#include "gateway/ops/accept_cli.hpp"
#include "gateway/ops/status_table.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

namespace dpgate::gateway::ctl {
namespace {

constexpr const char* kUsage = R"(usage:
  dpgate ctl [--config FILE | --admin URL] [--admin-token-file F] [--json] COMMAND
commands:
  status                      roles, health, windows, identity and acceptance per backend,
                              then one row per (backend, rank)
  watch [--count N]           status redrawn every second until Ctrl-C (N redraws, then exit)
  flip --expect-primary A --to B [--force] [--by NAME]
                              make B the primary; refused unless A is the primary now
  drain NAME | undrain NAME   stop / resume routing to a backend
  usage                       every key's tokens and requests in the last minute and today, and its budgets
  reload [--allow-no-keys]    re-read the config file (as SIGHUP does); a config that requires keys
                              and has none is refused unless --allow-no-keys
  accept NAME                 run `dpgate accept` against a configured backend (needs --config)
the admin API: --config FILE (admin.address, admin.port) or --admin http://HOST:PORT;
  with neither, $DPGATE_CONFIG, else /etc/dpgate/dpgate.yaml when it exists
the admin token: --admin-token-file F, else $DPGATE_ADMIN_TOKEN, else the config's admin.token_file
  (or a demo config's admin.token_plain)
--json prints the API's JSON answer instead of text
exit codes: 0 done, 1 refused (the reason is printed), 2 usage, 3 the admin API is unreachable
)";

constexpr const char* kServiceConfig = "/etc/dpgate/dpgate.yaml";

enum ExitCode { kDone = 0, kRefused = 1, kUsageError = 2, kUnreachable = 3 };

// The admin API answers within its own probe timeouts; a flip waits for an
// identity probe of the new primary.
constexpr uint64_t kTimeoutMs = 10000;
constexpr uint64_t kFlipTimeoutMs = 60000;

struct Options {
    std::string config_path;
    std::string admin_url;
    std::string token_file;
    std::string command;
    std::vector<std::string> args;
    std::string expect_primary, to, by;
    bool json = false;
    bool force = false;
    bool allow_no_keys = false;
    long count = 0;  // watch: 0 = until Ctrl-C
};

// Where the admin API is and the token it wants.
struct Admin {
    conf::BackendConfig target;  // host and port are all HealthChecker::call uses
    std::string url;
    std::string token;
};

int usage(const std::string& message) {
    std::cerr << "dpgate ctl: " << message << "\n\n" << kUsage;
    return kUsageError;
}

std::optional<std::string> readToken(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    std::string token = text.str();
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
    return token;
}

// The message of an OpenAI-shaped error body, else the body itself.
std::string errorMessage(const std::string& body) {
    nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
    if (parsed.is_object() && parsed.contains("error")) {
        const nlohmann::json& error = parsed["error"];
        if (error.is_object() && error.contains("message") && error["message"].is_string())
            return error["message"].get<std::string>();
        if (error.is_string()) return error.get<std::string>();
    }
    return body.empty() ? std::string("(no body)") : body;
}

awaitable<void> callInto(conf::BackendConfig target, HealthChecker::Call call, HealthChecker::Fetched* out) {
    HealthChecker::Fetched fetched = co_await HealthChecker::call(target, call);
    *out = std::move(fetched);
}

HealthChecker::Fetched request(const Admin& admin, http::verb method, const std::string& path, std::string body,
                               uint64_t timeout_ms) {
    HealthChecker::Call call;
    call.method = method;
    call.target = path;
    call.body = std::move(body);
    call.timeout_ms = timeout_ms;
    call.headers = {{"Authorization", "Bearer " + admin.token}, {"User-Agent", "dpgate-ctl"}};
    HealthChecker::Fetched fetched;
    net::io_context io;
    net::co_spawn(io, callInto(admin.target, std::move(call), &fetched), net::detached);
    io.run();
    return fetched;
}

void printJson(const std::string& body) { std::cout << body << (body.ends_with('\n') ? "" : "\n"); }

// 0 when the API answered 2xx; else prints why and returns 1 or 3.
int outcome(const Admin& admin, const HealthChecker::Fetched& fetched, bool json) {
    if (fetched.status == 0) {
        std::cerr << "dpgate ctl: cannot reach the admin API at " << admin.url << ": " << fetched.error << "\n";
        return kUnreachable;
    }
    if (fetched.status >= 200 && fetched.status < 300) return kDone;
    if (json) printJson(fetched.body);
    std::cerr << "dpgate ctl: refused (HTTP " << fetched.status << "): " << errorMessage(fetched.body) << "\n";
    return kRefused;
}

int printStatus(const std::string& body) {
    nlohmann::json status = nlohmann::json::parse(body, nullptr, false);
    if (status.is_discarded()) {
        std::cerr << "dpgate ctl: /admin/status did not answer JSON\n";
        return kRefused;
    }
    for (const std::string& line : statusTable(status)) std::cout << line << "\n";
    return kDone;
}

int status(const Admin& admin, bool json) {
    HealthChecker::Fetched fetched = request(admin, http::verb::get, "/admin/status", {}, kTimeoutMs);
    if (int code = outcome(admin, fetched, json); code != kDone) return code;
    if (json) {
        printJson(fetched.body);
        return kDone;
    }
    return printStatus(fetched.body);
}

int keyUsage(const Admin& admin, bool json) {
    HealthChecker::Fetched fetched = request(admin, http::verb::get, "/admin/usage", {}, kTimeoutMs);
    if (int code = outcome(admin, fetched, json); code != kDone) return code;
    if (json) {
        printJson(fetched.body);
        return kDone;
    }
    nlohmann::json usage = nlohmann::json::parse(fetched.body, nullptr, false);
    if (usage.is_discarded()) {
        std::cerr << "dpgate ctl: /admin/usage did not answer JSON\n";
        return kRefused;
    }
    for (const std::string& line : usageTable(usage)) std::cout << line << "\n";
    return kDone;
}

std::string utcNow() {
    std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

// Redraws until Ctrl-C (or `count` redraws); an unreachable gateway is shown
// and retried, so a watch survives a restart.
int watch(const Admin& admin, bool json, long count) {
    const bool tty = ::isatty(STDOUT_FILENO) == 1;
    int code = kDone;
    for (long drawn = 0; count == 0 || drawn < count; ++drawn) {
        if (drawn > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
        if (tty && !json) std::cout << "\033[H\033[2J";
        if (!json) std::cout << "dpgate ctl watch " << admin.url << "  " << utcNow() << "  (Ctrl-C to stop)\n";
        code = status(admin, json);
        std::cout << std::flush;
    }
    return code;
}

int post(const Admin& admin, const std::string& path, const std::string& body, uint64_t timeout_ms, bool json,
         const std::string& done) {
    HealthChecker::Fetched fetched = request(admin, http::verb::post, path, body, timeout_ms);
    if (int code = outcome(admin, fetched, json); code != kDone) return code;
    if (json) printJson(fetched.body);
    else std::cout << done << "\n";
    return kDone;
}

std::string defaultBy() {
    const char* user = std::getenv("USER");
    return std::string(user && *user ? user : "operator") + "@ctl";
}

int flip(const Admin& admin, const Options& options) {
    nlohmann::json body = {{"expect_primary", options.expect_primary},
                           {"to", options.to},
                           {"force", options.force},
                           {"by", options.by.empty() ? defaultBy() : options.by}};
    return post(admin, "/admin/flip", body.dump(), kFlipTimeoutMs, options.json,
                std::string("flipped: ") + options.to + " is the primary (was " + options.expect_primary + ")" +
                    (options.force ? ", forced" : ""));
}

// `dpgate accept` in this process: its verdict lines, its record, its exit code.
int accept(const Options& options, const char* dpgate_version) {
    std::vector<std::string> args = {"--config", options.config_path, "--backend", options.args[0]};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return acceptance::runAcceptCli(int(argv.size()), argv.data(), dpgate_version);
}

// From --config and/or --admin, the token from the flag, the environment or
// the config's token file. An error message when they do not say enough.
std::string resolveAdmin(const Options& options, Admin& admin) {
    std::string config_token_file, config_token_plain;
    bool config_token_hashed = false;
    if (!options.config_path.empty()) {
        conf::Config config;
        try {
            config = conf::loadConfigFile(options.config_path, {.admin_token_plain = &config_token_plain});
        } catch (const std::exception& e) {
            return e.what();
        }
        std::string host = config.admin.address;
        // A listener on every address is reached on loopback.
        if (host == "0.0.0.0") host = "127.0.0.1";
        if (host == "::") host = "::1";
        admin.target.host = host;
        admin.target.port = config.admin.port;
        admin.url = "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                    std::to_string(config.admin.port);
        config_token_file = config.admin.token_file;
        config_token_hashed = !config.admin.token_sha256.empty();
    }
    if (!options.admin_url.empty()) {
        std::optional<conf::BackendUrl> url = conf::parseBackendUrl(options.admin_url);
        if (!url || url->scheme != "http") return "--admin: expected http://HOST:PORT, got '" + options.admin_url + "'";
        admin.target.host = url->host;
        admin.target.port = url->port;
        admin.url = options.admin_url;
    }
    if (admin.url.empty()) return "give --config FILE or --admin URL";
    if (admin.target.port == 0) return "the config's admin.port is 0 (an ephemeral port): give --admin URL";
    admin.target.scheme = "http";
    admin.target.name = "admin";
    admin.target.url = admin.url;

    if (!options.token_file.empty()) {
        std::optional<std::string> token = readToken(options.token_file);
        if (!token) return "--admin-token-file: cannot read " + options.token_file;
        admin.token = *token;
    } else if (const char* env = std::getenv("DPGATE_ADMIN_TOKEN"); env && *env) {
        admin.token = env;
    } else if (!config_token_file.empty()) {
        std::optional<std::string> token = readToken(config_token_file);
        if (!token) return "admin.token_file: cannot read " + config_token_file;
        admin.token = *token;
    } else if (!config_token_plain.empty()) {
        admin.token = config_token_plain;
    } else if (config_token_hashed) {
        return "the config holds only the admin token's SHA-256: give the token in DPGATE_ADMIN_TOKEN or "
               "--admin-token-file";
    } else {
        return "no admin token: give DPGATE_ADMIN_TOKEN or --admin-token-file";
    }
    if (admin.token.empty()) return "the admin token is empty";
    return {};
}

}  // namespace

int runCtlCli(int argc, char** argv, const char* dpgate_version) {
    Options options;
    for (int i = 0; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&](std::string& into) {
            if (i + 1 >= argc) return false;
            into = argv[++i];
            return true;
        };
        if (arg == "--help" || arg == "-h") {
            std::cout << kUsage;
            return kDone;
        } else if (arg == "--config") {
            if (!value(options.config_path)) return usage("--config needs a file");
        } else if (arg == "--admin") {
            if (!value(options.admin_url)) return usage("--admin needs a URL");
        } else if (arg == "--admin-token-file") {
            if (!value(options.token_file)) return usage("--admin-token-file needs a file");
        } else if (arg == "--json") {
            options.json = true;
        } else if (arg == "--expect-primary") {
            if (!value(options.expect_primary)) return usage("--expect-primary needs a backend name");
        } else if (arg == "--to") {
            if (!value(options.to)) return usage("--to needs a backend name");
        } else if (arg == "--by") {
            if (!value(options.by)) return usage("--by needs a name");
        } else if (arg == "--force") {
            options.force = true;
        } else if (arg == "--allow-no-keys") {
            options.allow_no_keys = true;
        } else if (arg == "--count") {
            std::string text;
            if (!value(text)) return usage("--count needs a number");
            char* end = nullptr;
            options.count = std::strtol(text.c_str(), &end, 10);
            if (text.empty() || *end != '\0' || options.count < 1) return usage("--count needs a number above 0");
        } else if (arg.starts_with("-")) {
            return usage("unknown option '" + arg + "'");
        } else if (options.command.empty()) {
            options.command = arg;
        } else {
            options.args.push_back(arg);
        }
    }
    if (options.config_path.empty() && options.admin_url.empty()) {
        // On the service host: the config the unit runs with.
        if (const char* env = std::getenv("DPGATE_CONFIG"); env && *env) options.config_path = env;
        else if (std::error_code ec; std::filesystem::exists(kServiceConfig, ec)) options.config_path = kServiceConfig;
    }
    const std::string& command = options.command;
    if (command.empty()) return usage("missing command");
    const std::map<std::string, size_t> arity = {{"status", 0},  {"watch", 0},  {"flip", 0},   {"drain", 1},
                                                 {"undrain", 1}, {"reload", 0}, {"accept", 1}, {"usage", 0}};
    auto known = arity.find(command);
    if (known == arity.end()) return usage("unknown command '" + command + "'");
    if (options.args.size() != known->second)
        return usage(command + (known->second ? " needs one backend name" : " takes no arguments"));
    if (command != "flip" &&
        (!options.expect_primary.empty() || !options.to.empty() || options.force || !options.by.empty()))
        return usage("--expect-primary, --to, --force and --by belong to flip");
    if (command != "watch" && options.count != 0) return usage("--count belongs to watch");
    if (command != "reload" && options.allow_no_keys) return usage("--allow-no-keys belongs to reload");
    if (command == "flip" && (options.expect_primary.empty() || options.to.empty()))
        return usage("flip needs --expect-primary A --to B");
    if (command == "accept") {
        if (options.config_path.empty()) return usage("accept needs --config FILE (the backend's URL and model)");
        return accept(options, dpgate_version);
    }

    Admin admin;
    if (std::string error = resolveAdmin(options, admin); !error.empty()) {
        std::cerr << "dpgate ctl: " << error << "\n";
        return kUsageError;
    }
    if (command == "status") return status(admin, options.json);
    if (command == "watch") return watch(admin, options.json, options.count);
    if (command == "usage") return keyUsage(admin, options.json);
    if (command == "flip") return flip(admin, options);
    if (command == "reload")
        return post(admin, options.allow_no_keys ? "/admin/reload?allow_no_keys=true" : "/admin/reload", {}, kTimeoutMs,
                    options.json, "reloaded the config");
    const std::string& name = options.args[0];
    const bool drain = command == "drain";
    return post(admin, std::string(drain ? "/admin/drain/" : "/admin/undrain/") + name, {}, kTimeoutMs, options.json,
                name + (drain ? " drained" : " undrained"));
}

}  // namespace dpgate::gateway::ctl
