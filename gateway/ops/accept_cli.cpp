#include "gateway/ops/accept_cli.hpp"

#include "conf/sha256_hex.hpp"
#include "gateway/acceptance/role_state.hpp"
#include "gateway/ops/accept_checks.hpp"
#include "gateway/path/model_files.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace dpgate::acceptance {
namespace {

constexpr const char* kUsage = R"(usage:
  dpgate accept --config FILE --backend NAME [--out DIR]
      run the acceptance checklist against one configured backend; one verdict
      line per check; the record goes to DIR, else the config's acceptance.dir
  dpgate accept --compare OLD.json NEW.json
      what changed between two acceptance records (exit 1 when anything did)
)";

int usage(const std::string& message) {
    std::cerr << "dpgate accept: " << message << "\n\n" << kUsage;
    return 2;
}

std::optional<std::string> readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string fileDigest(const std::string& path) {
    std::optional<std::string> text = readFile(path);
    return text ? conf::sha256Hex(*text) : std::string();
}

int compare(const std::string& old_path, const std::string& new_path) {
    std::optional<AcceptanceRecord> records[2];
    const std::string paths[2] = {old_path, new_path};
    for (int i = 0; i < 2; ++i) {
        std::optional<std::string> text = readFile(paths[i]);
        if (!text) {
            std::cerr << "dpgate accept: cannot read " << paths[i] << "\n";
            return 2;
        }
        std::string error;
        records[i] = parseRecord(*text, error);
        if (!records[i]) {
            std::cerr << "dpgate accept: " << paths[i] << ": not an acceptance record: " << error << "\n";
            return 2;
        }
    }
    std::vector<std::string> lines = compareRecords(*records[0], *records[1]);
    bool identity_changed = !identityDifferences(records[0]->identity, records[1]->identity).empty();
    std::cout << records[0]->backend << " " << records[0]->time << " -> " << records[1]->backend << " "
              << records[1]->time << "\n";
    for (const std::string& line : lines) std::cout << "  " << line << "\n";
    if (lines.empty()) std::cout << "  no change: identity, dpgate and every verdict are the same\n";
    else if (identity_changed)
        std::cout << "identity changed: the new record is for a different build of the backend\n";
    return lines.empty() ? 0 : 1;
}

}  // namespace

int runAcceptCli(int argc, char** argv, const char* dpgate_version) {
    std::string config_path, backend_name, out_dir;
    std::vector<std::string> compare_paths;
    bool comparing = false;
    for (int i = 0; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&](std::string& into) {
            if (i + 1 >= argc) return false;
            into = argv[++i];
            return true;
        };
        if (arg == "--config") {
            if (!value(config_path)) return usage("--config needs a file");
        } else if (arg == "--backend") {
            if (!value(backend_name)) return usage("--backend needs a name");
        } else if (arg == "--out") {
            if (!value(out_dir)) return usage("--out needs a folder");
        } else if (arg == "--compare") {
            comparing = true;
        } else if (arg == "--help" || arg == "-h") {
            std::cout << kUsage;
            return 0;
        } else if (comparing && !arg.starts_with("--")) {
            compare_paths.push_back(arg);
        } else {
            return usage("unknown argument '" + arg + "'");
        }
    }
    if (comparing) {
        if (compare_paths.size() != 2) return usage("--compare needs two record files");
        return compare(compare_paths[0], compare_paths[1]);
    }
    if (config_path.empty()) return usage("--config FILE is required");
    if (backend_name.empty()) return usage("--backend NAME is required");

    conf::Config config;
    gateway::ModelFiles files;
    try {
        config = conf::loadConfigFile(config_path);
        files = gateway::loadModelFiles(config.model);
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 2;
    }
    const conf::BackendConfig* backend = nullptr;
    for (const conf::BackendConfig& b : config.backends)
        if (b.name == backend_name) backend = &b;
    if (!backend) return usage("the config has no backend named '" + backend_name + "'");
    if (out_dir.empty()) out_dir = config.acceptance.dir;
    if (out_dir.empty()) return usage("give --out DIR or set acceptance.dir in the config");

    admission::Admitter admitter(files.tokenizer, files.chat_template);
    std::cout << "accept " << backend->name << " (" << backend->url << "), model " << config.model.id << ", window "
              << config.model.window_tokens << ", " << backend->dp_ranks << " ranks" << std::endl;
    AcceptanceRecord record;
    gateway::net::io_context io;
    gateway::net::co_spawn(
        io,
        [&]() -> gateway::awaitable<void> {
            record = co_await runChecks({config, *backend, admitter}, [](const CheckResult& check) {
                std::string name = check.name;
                name.resize(std::max<size_t>(name.size(), 16), ' ');
                std::cout << (check.passed ? "PASS  " : "FAIL  ") << name << check.detail << std::endl;
            });
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    try {
        io.run();
    } catch (const std::exception& e) {
        std::cerr << "dpgate accept: " << e.what() << "\n";
        return 2;
    }
    record.dpgate_version = dpgate_version;
    record.config_digest = fileDigest(config.source_path);
    record.template_digest = files.chat_template ? conf::sha256Hex(files.chat_template->source()) : std::string();
    std::string tokenizer = config.model.tokenizer;
    if (!tokenizer.empty() && std::filesystem::is_directory(tokenizer)) tokenizer += "/tokenizer.json";
    record.tokenizer_digest = tokenizer.empty() ? std::string() : fileDigest(tokenizer);

    // Two runs in one second get a suffix, never the same file.
    std::string path = (std::filesystem::path(out_dir) / recordFileName(record.backend, record.time)).string();
    for (int n = 2; std::filesystem::exists(path); ++n) {
        std::string name = recordFileName(record.backend, record.time);
        name.insert(name.size() - 5, "-" + std::to_string(n));
        path = (std::filesystem::path(out_dir) / name).string();
    }
    if (std::string error = writeFileAtomically(path, recordJson(record)); !error.empty()) {
        std::cerr << "dpgate accept: the record was not saved: " << error << "\n";
        return 2;
    }
    size_t passed = 0;
    for (const CheckResult& c : record.checks) passed += c.passed;
    std::cout << (record.passed ? "ACCEPTED " : "NOT ACCEPTED ") << backend->name << ": " << passed << " of "
              << record.checks.size() << " checks passed; record " << path << std::endl;
    return record.passed ? 0 : 1;
}

}  // namespace dpgate::acceptance
