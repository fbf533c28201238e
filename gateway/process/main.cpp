// dpgate: the gateway process and its operator subcommands.
#include "admission/tokens_cli.hpp"
#include "common/fast_paths.hpp"
#include "conf/config.hpp"
#include "gateway/acceptance/writable_dir.hpp"
#include "gateway/auth/keys_cli.hpp"
#include "gateway/budget/budgets.hpp"
#include "gateway/control/control_plane.hpp"
#include "gateway/ops/accept_cli.hpp"
#include "gateway/ops/ctl_cli.hpp"
#include "gateway/path/model_files.hpp"
#include "gateway/platform/heap_pages.hpp"
#include "gateway/platform/log.hpp"
#include "gateway/process/server.hpp"

#include <sys/resource.h>

#include <cstring>
#include <iostream>
#include <string>

#ifndef DPGATE_VERSION
#define DPGATE_VERSION "0.0.0"
#endif

namespace {

constexpr const char* kUsage = R"(dpgate — one OpenAI-compatible endpoint in front of DeepSeek DP-rank backends

usage:
  dpgate serve --config FILE [--ignore-state]
                                  run the gateway (SIGTERM/SIGINT drain and exit 0); roles resume
                                  from state.dir unless --ignore-state
  dpgate check --config FILE      validate a config file and print its summary
  dpgate keys add NAME --file F [--trusted] [--metrics] [--max-concurrent N] [--requests-per-min N]
  dpgate keys list --file F | dpgate keys remove NAME --file F
                                  manage client API keys (the key is printed once; only its hash is stored)
  dpgate accept --config FILE --backend NAME [--out DIR]
                                  the acceptance checklist against one backend; saves its record
  dpgate accept --compare OLD.json NEW.json
                                  what changed between two acceptance records
  dpgate ctl [--config FILE | --admin URL] [--json] status|watch|flip|drain|undrain|reload|accept ...
                                  the operator's CLI over the admin API (`dpgate ctl --help`)
  dpgate tokens --tokenizer PATH [--chat-template FILE] [--jsonl] [--show-prompt]
                                  exact token counts of stdin (text, or chat bodies per line,
                                  rendered with the model's chat template as vLLM does)
  dpgate --version                print the version
  dpgate --help                   this text

See conf/examples/dpgate.yaml for every configuration key and its default.
)";

int usageError(const std::string& message) {
    std::cerr << "dpgate: " << message << "\n\n" << kUsage;
    return 2;
}

// `--config FILE` from argv[first..]; empty when absent. `--ignore-state`
// sets *ignore_state when it is given (serve only).
std::string configArgument(int argc, char** argv, int first, std::string& error, bool* ignore_state = nullptr) {
    std::string path;
    for (int i = first; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--ignore-state" && ignore_state) {
            *ignore_state = true;
        } else if (arg == "--config" && i + 1 < argc) {
            path = argv[++i];
        } else if (arg.rfind("--config=", 0) == 0) {
            path = arg.substr(9);
        } else {
            error = "unknown argument '" + arg + "'";
            return {};
        }
    }
    if (path.empty() && error.empty()) error = "--config FILE is required";
    return path;
}

}  // namespace

// Each relayed request holds two sockets (client and upstream): the
// default soft limit of 1,024 descriptors would cap dpgate near 500
// concurrent streams. The soft limit goes up to the hard one.
static void raiseOpenFileLimit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
}

// Before the model's files are read and the threads start, so that both
// live in the pages it chooses.
static std::string chooseHeapPages(bool huge_pages) {
    if (!huge_pages) return "heap: 4 KiB pages (huge_pages: false)";
    if (!dpgate::fastPathOn(dpgate::FastPath::heap_pages)) return "heap: 4 KiB pages (DPGATE_PLAIN: heap_pages off)";
#ifdef DPGATE_TCMALLOC
    return dpgate::gateway::backHeapWithHugePages();
#else
    return "heap: as the allocator keeps it (dpgate was built without tcmalloc)";
#endif
}

int main(int argc, char** argv) {
    using namespace dpgate;
    if (argc < 2) return usageError("missing command");
    std::string command = argv[1];
    if (command == "--help" || command == "-h" || command == "help") {
        std::cout << kUsage;
        return 0;
    }
    if (command == "--version" || command == "version") {
        std::cout << "dpgate " << DPGATE_VERSION << "\n";
        return 0;
    }
    if (command == "tokens") return admission::runTokensCli(argc - 2, argv + 2);
    if (command == "keys") return auth::runKeysCli(argc - 2, argv + 2);
    if (command == "accept") return acceptance::runAcceptCli(argc - 2, argv + 2, DPGATE_VERSION);
    if (command == "ctl") return gateway::ctl::runCtlCli(argc - 2, argv + 2, DPGATE_VERSION);
    if (command == "serve" || command == "check") {
        std::string error;
        bool ignore_state = false;
        std::string path = configArgument(argc, argv, 2, error, command == "serve" ? &ignore_state : nullptr);
        if (!error.empty()) return usageError(error);
        conf::Config config;
        try {
            config = conf::loadConfigFile(path);
        } catch (const conf::ConfigError& e) {
            std::cerr << e.what() << "\n";
            return 1;
        }
        if (command == "check") {
            // The model's files too: a template that does not parse fails here, not at start.
            gateway::ModelFiles files;
            try {
                files = gateway::loadModelFiles(config.model);
            } catch (const std::exception& e) {
                std::cerr << "conf: " << path << ": " << e.what() << "\n";
                return 1;
            }
            std::cout << "conf: " << path << ": ok (" << config.backends.size() << " backends, window "
                      << config.model.window_tokens << ")\n"
                      << files.summary << gateway::control::describeControl(config)
                      << gateway::budget::describeBudgets(config);
            return 0;
        }
        // Flips, drains and acceptance write here: a folder that cannot be
        // written stops the start, not the first flip.
        for (const auto& [dir, key] :
             {std::pair{config.state.dir, "state.dir"}, std::pair{config.acceptance.dir, "acceptance.dir"}}) {
            if (dir.empty()) continue;
            if (std::string problem = acceptance::writableDirProblem(dir, key); !problem.empty()) {
                std::cerr << "dpgate: conf: " << problem << "\n";
                return 1;
            }
        }
        gateway::setLogLevel(gateway::parseLogLevel(config.log.level));
        raiseOpenFileLimit();
        gateway::logLine(gateway::LogLevel::info, chooseHeapPages(config.huge_pages));
        if (const std::string off = fastPathsOffText(); !off.empty())
            gateway::logLine(gateway::LogLevel::info, "fast paths off (DPGATE_PLAIN): " + off);
        try {
            gateway::Server server(std::move(config), {.ignore_state = ignore_state, .version = DPGATE_VERSION});
            return server.run();
        } catch (const std::exception& e) {
            std::cerr << "dpgate: " << e.what() << "\n";
            return 1;
        }
    }
    return usageError("unknown command '" + command + "'");
}
