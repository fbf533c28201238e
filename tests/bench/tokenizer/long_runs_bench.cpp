// dpgate-bench-long-runs: counting speed and peak memory on text made to
// defeat a tokenizer -- pieces megabytes long: runs of one character
// (letter, space, newline, punctuation, CJK, emoji), digits, a periodic
// run, words without spaces, runs inside ordinary text -- and on the
// ordinary corpora, at 10 MB and 50 MB, beside HuggingFace tokenizers
// (npm, via node) on the same files, and beside an older build's
// `dpgate tokens` when one is given (--before-cli).
//
// Each count runs in a fresh process (this program, --child): the counter
// is new, as in a worker that meets its first huge request, and the peak
// resident memory of the count alone is read (VmHWM, reset just before it
// through /proc/self/clear_refs). "peak B/B" is that peak above the
// resident memory before the count, per input byte; "kept B/B" what is
// still resident above it after the count.
//
//   dpgate-bench-long-runs [--tokenizer DIR] [--sizes 10,50] [--only NAME] [--runs N]
//                          [--no-reference] [--reference-timeout S] [--before-cli PATH] [--plain]
//   dpgate-bench-long-runs --child FILE [--plain]     (one count; run by the bench itself)
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "admission/tokenizer/token_counter.hpp"
#include "synthetic_corpus.hpp"

namespace {

using namespace dpgate::admission;
using namespace dpgate::bench;
using Clock = std::chrono::steady_clock;

// This thread's CPU time: on a machine shared with builds, steadier than wall time.
double threadCpuMs() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

long statusKb(const char* field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::string(field).size());
    }
    return -1;
}

std::string repeatTo(std::string_view unit, std::size_t bytes) {
    std::string out;
    out.reserve(bytes + unit.size());
    while (out.size() < bytes) out += unit;
    return trimToCharBoundary(std::move(out), bytes);
}

const std::vector<std::string> kClasses = {
    "letters",     "spaces", "digits",       "newlines",     "punctuation", "cjk",     "emoji", "abab", "tabs",
    "random-word", "base64", "added-prefix", "runs-in-text", "english",     "chinese", "code",  "chat"};

std::string makeClass(const std::string& name, std::size_t bytes) {
    if (name == "letters") return repeatTo("a", bytes);
    if (name == "spaces") return repeatTo(" ", bytes);
    if (name == "digits") return repeatTo("7", bytes);
    if (name == "newlines") return repeatTo("\n", bytes);
    if (name == "punctuation") return repeatTo("!", bytes);
    if (name == "cjk") return repeatTo("你", bytes);
    if (name == "emoji") return repeatTo("\xf0\x9f\x98\x80", bytes);
    if (name == "abab") return repeatTo("ab", bytes);
    if (name == "tabs") return repeatTo("\t", bytes);
    // An added token's first bytes again and again: the added-token matcher
    // walks each one and gives up at its end.
    if (name == "added-prefix")
        return repeatTo(
            "<\xef\xbd\x9c"
            "begin\xe2\x96\x81"
            "of\xe2\x96\x81"
            "sentence",
            bytes);
    Rng rng{0x1e44u + bytes};
    if (name == "random-word" || name == "base64") {
        const std::string_view alphabet = name == "random-word"
                                              ? "abcdefghijklmnopqrstuvwxyz"
                                              : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        std::string out(bytes, ' ');
        for (char& c : out) c = alphabet[rng.below(alphabet.size())];
        return out;
    }
    const auto lexicon = makeLexicon(rng, 20000);
    if (name == "runs-in-text") {
        // Prose with a run of 100 KB to 1 MB every ~200 KB.
        static const char* kRunUnits[] = {"a", " ", "\n", "-", "=", "你", "\xf0\x9f\x98\x80", "ab", "\t", "7"};
        std::string out;
        while (out.size() < bytes) {
            out += generate(200000, [&] { return englishParagraph(rng, lexicon); });
            out += repeatTo(kRunUnits[rng.below(std::size(kRunUnits))], 100000 + rng.below(900000));
        }
        return trimToCharBoundary(std::move(out), bytes);
    }
    if (name == "english") return generate(bytes, [&] { return englishParagraph(rng, lexicon); });
    if (name == "chinese") return generate(bytes, [&] { return chineseParagraph(rng); });
    if (name == "code") return generate(bytes, [&] { return codeBlock(rng, lexicon); });
    if (name == "chat") return generate(bytes, [&] { return chatTurn(rng, lexicon); });
    return {};
}

// One count of FILE by a fresh counter in this fresh process.
int child(const std::filesystem::path& dir, const std::string& file, bool plain) {
    TokenizerLoad loaded = Tokenizer::load(dir);
    if (!loaded.tokenizer) {
        std::fprintf(stderr, "%s\n", loaded.error.c_str());
        return 1;
    }
    std::ifstream in(file, std::ios::binary);
    std::ostringstream read;
    read << in.rdbuf();
    const std::string text = std::move(read).str();
    TokenCounter counter(loaded.tokenizer);
    counter.setRankSweep(!plain);
    const long before_kb = statusKb("VmRSS:");
    std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
    const auto t0 = Clock::now();
    const double cpu0 = threadCpuMs();
    const TokenCount count = counter.count(text);
    const double cpu_ms = threadCpuMs() - cpu0;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const long peak_kb = statusKb("VmHWM:");
    const long after_kb = statusKb("VmRSS:");
    std::printf(
        "{\"ok\":%s,\"ms\":%.3f,\"cpu_ms\":%.3f,\"tokens\":%llu,\"before_kb\":%ld,\"peak_kb\":%ld,\"after_kb\":%ld}\n",
        count.ok ? "true" : "false", ms, cpu_ms, static_cast<unsigned long long>(count.tokens), before_kb, peak_kb,
        after_kb);
    return 0;
}

// Runs a shell command, returns its output (stdout and stderr).
std::string run(const std::string& cmd) {
    std::string out;
    if (FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r")) {
        char buf[4096];
        while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
        ::pclose(pipe);
    }
    return out;
}

// The first line of `out` that parses as a JSON object holding `key`, or null.
nlohmann::json jsonLine(const std::string& out, const char* key) {
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty() || line[0] != '{') continue;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_discarded() && j.contains(key)) return j;
    }
    return nullptr;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

std::string shellQuote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

int main(int argc, char** argv) {
    std::filesystem::path dir = std::filesystem::path(DPGATE_SOURCE_DIR) / "local/tokenizer/deepseek-v3";
    if (const char* env = std::getenv("DPGATE_TOKENIZER_DIR")) dir = env;
    std::vector<std::size_t> sizes_mb = {10, 50};
    std::string only;
    std::string child_file;
    std::string before_cli;
    bool reference = true;
    bool plain = false;
    int runs = 3;
    int reference_timeout_s = 120;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--tokenizer" && i + 1 < argc) {
            dir = argv[++i];
        } else if (arg == "--sizes" && i + 1 < argc) {
            sizes_mb.clear();
            std::istringstream list(argv[++i]);
            for (std::string mb; std::getline(list, mb, ',');) sizes_mb.push_back(std::stoul(mb));
        } else if (arg == "--only" && i + 1 < argc) {
            only = argv[++i];
        } else if (arg == "--child" && i + 1 < argc) {
            child_file = argv[++i];
        } else if (arg == "--before-cli" && i + 1 < argc) {
            before_cli = argv[++i];
        } else if (arg == "--no-reference") {
            reference = false;
        } else if (arg == "--plain") {
            plain = true;
        } else if (arg == "--runs" && i + 1 < argc) {
            runs = std::max(1, std::atoi(argv[++i]));
        } else if (arg == "--reference-timeout" && i + 1 < argc) {
            reference_timeout_s = std::max(1, std::atoi(argv[++i]));
        } else {
            std::fprintf(stderr, "unknown argument: %s\n", arg.c_str());
            return 2;
        }
    }
    if (!child_file.empty()) return child(dir, child_file, plain);

    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::filesystem::path tmp =
        std::filesystem::temp_directory_path() / ("dpgate-long-runs-" + std::to_string(::getpid()));
    std::filesystem::create_directories(tmp);
    const std::string reference_script =
        (std::filesystem::path(DPGATE_SOURCE_DIR) / "tests/bench/tokenizer/long_runs_reference.mjs").string();

    // What the older CLI costs with no input (its load), shown beside its times.
    double before_base_s = 0;
    if (!before_cli.empty()) {
        const auto empty = tmp / "empty.txt";
        std::ofstream(empty).flush();
        std::vector<double> base;
        for (int i = 0; i < 3; ++i) {
            const std::string out = run("/usr/bin/time -f 'elapsed %e maxrss %M' " + shellQuote(before_cli) +
                                        " tokens --tokenizer " + shellQuote(dir.string()) + " < " + empty.string());
            const auto at = out.find("elapsed ");
            if (at != std::string::npos) base.push_back(std::atof(out.c_str() + at + 8));
        }
        before_base_s = median(base);
    }

    std::printf("dpgate: %s; median of %d fresh processes each%s\n", plain ? "rank sweep OFF (--plain)" : "as built",
                runs, reference ? "; reference: HuggingFace tokenizers (node), one run" : "");
    if (!before_cli.empty())
        std::printf("before: `%s tokens` (wall seconds, load included: %.2f s with no input; peak RSS)\n",
                    before_cli.c_str(), before_base_s);
    std::printf("%-13s %4s %10s %9s %8s %8s %8s | %9s %8s %-10s", "class", "MB", "tokens", "MB/s", "cpu MB/s",
                "peak B/B", "kept B/B", "HF MB/s", "HF pk B/B", "counts");
    if (!before_cli.empty()) std::printf(" | %9s %11s", "before s", "before peak");
    std::printf("\n");
    std::fflush(stdout);

    for (const std::size_t mb : sizes_mb) {
        for (const std::string& name : kClasses) {
            if (!only.empty() && name != only) continue;
            const std::size_t bytes = mb * 1000 * 1000;
            const auto file = tmp / (name + "-" + std::to_string(mb) + ".txt");
            {
                const std::string text = makeClass(name, bytes);
                std::ofstream(file, std::ios::binary) << text;
            }
            std::vector<double> ms, cpu_ms, peak, kept;
            std::uint64_t tokens = 0;
            bool ok = true;
            for (int r = 0; r < runs; ++r) {
                const auto j = jsonLine(run(shellQuote(self) + " --tokenizer " + shellQuote(dir.string()) +
                                            " --child " + file.string() + (plain ? " --plain" : "")),
                                        "ms");
                if (j.is_null()) {
                    ok = false;
                    break;
                }
                ok = ok && j["ok"].get<bool>();
                ms.push_back(j["ms"].get<double>());
                cpu_ms.push_back(j["cpu_ms"].get<double>());
                tokens = j["tokens"].get<std::uint64_t>();
                const double before = j["before_kb"].get<double>();
                peak.push_back((j["peak_kb"].get<double>() - before) * 1024 / static_cast<double>(bytes));
                kept.push_back((j["after_kb"].get<double>() - before) * 1024 / static_cast<double>(bytes));
            }
            if (!ok) {
                std::printf("%-13s %4zu count failed\n", name.c_str(), mb);
                continue;
            }
            const double mbs = static_cast<double>(bytes) / 1e3 / median(ms);
            const double cpu_mbs = static_cast<double>(bytes) / 1e3 / median(cpu_ms);
            std::printf("%-13s %4zu %10llu %9.1f %8.1f %8.2f %8.2f |", name.c_str(), mb,
                        static_cast<unsigned long long>(tokens), mbs, cpu_mbs, median(peak), median(kept));
            if (reference) {
                const std::string out =
                    run("timeout " + std::to_string(reference_timeout_s) + " node " + shellQuote(reference_script) +
                        " " + shellQuote((dir / "tokenizer.json").string()) + " " + file.string());
                const auto j = jsonLine(out, "tokens");
                if (j.is_null()) {
                    const bool timed_out = out.empty() || out.find("Error") == std::string::npos;
                    std::string why = timed_out ? "> " + std::to_string(reference_timeout_s) + " s" : "failed";
                    if (out.find("retry-limit") != std::string::npos) why = "regex abort";
                    std::printf(" %9s %8s %-10s", why.c_str(), "-", "-");
                } else {
                    const double ref_mbs = static_cast<double>(bytes) / 1e3 / j["ms"].get<double>();
                    const double ref_peak = (j["peakAfterKb"].get<double>() - j["peakBeforeKb"].get<double>()) * 1024 /
                                            static_cast<double>(bytes);
                    std::printf(" %9.2f %8.2f %-10s", ref_mbs, ref_peak,
                                j["tokens"].get<std::uint64_t>() == tokens ? "identical" : "DIFFERENT");
                }
            } else {
                std::printf(" %9s %8s %-10s", "", "", "");
            }
            if (!before_cli.empty()) {
                const std::string out = run("timeout " + std::to_string(reference_timeout_s) +
                                            " /usr/bin/time -f 'elapsed %e maxrss %M' " + shellQuote(before_cli) +
                                            " tokens --tokenizer " + shellQuote(dir.string()) + " < " + file.string());
                const auto at = out.find("elapsed ");
                const auto j = jsonLine(out, "tokens");
                if (at == std::string::npos || j.is_null()) {
                    std::printf(" | %9s %11s", ("> " + std::to_string(reference_timeout_s) + " s").c_str(), "-");
                } else {
                    const double s = std::atof(out.c_str() + at + 8);
                    const double maxrss_mb = std::atof(out.c_str() + out.find("maxrss ") + 7) / 1024;
                    std::printf(" | %9.2f %8.0f MB%s", s, maxrss_mb,
                                j["tokens"].get<std::uint64_t>() == tokens ? "" : " DIFFERENT");
                }
            }
            std::printf("\n");
            std::fflush(stdout);
            std::filesystem::remove(file);
        }
    }
    std::filesystem::remove_all(tmp);
    return 0;
}
