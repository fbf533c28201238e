// dpgate-bench-tokenizer: single-thread token counting speed on 4 MB each of
// English prose, Chinese, source code and a mixed chat transcript, beside a
// plain memory pass over the same bytes and HuggingFace tokenizers (npm, via
// node) on the same text; the next turn of a 1M-token conversation; load
// time and resident memory. A fifth corpus, "system", is first-contact text
// made at run time from the machine's man pages and headers (system_corpus.hpp);
// every corpus is also counted cold: first pass in a fresh process.
//
//   dpgate-bench-tokenizer [--tokenizer DIR] [--no-reference] [--only english|chinese|code|chat|system]
//                          [--cold-runs N] [--save-corpora DIR]
//   dpgate-bench-tokenizer --cold-child FILE   (one cold count; run by the bench itself)
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "admission/admit.hpp"
#include "admission/request_scan.hpp"
#include "admission/template/chat_template.hpp"
#include "admission/tokenizer/deepseek_v3_splitter.hpp"
#include "admission/tokenizer/fast_hash.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "synthetic_corpus.hpp"
#include "system_corpus.hpp"

namespace {

using namespace dpgate::admission;
using namespace dpgate::bench;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

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

std::vector<std::string_view> chunk16k(std::string_view text) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = std::min(start + 16384, text.size());
        while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
        out.push_back(text.substr(start, end - start));
        start = end;
    }
    return out;
}

// --- measurements ---------------------------------------------------------------
volatile std::uint64_t sink = 0;

double mbPerS(std::size_t bytes, double ms) { return static_cast<double>(bytes) / 1e6 / (ms / 1e3); }

struct Measured {
    double ms = 1e300;
    std::uint64_t tokens = 0;
    double cpu_ms = 1e300;  // this thread's CPU time (best, or the cold runs' median)
};

template <typename Fn>
Measured bestOf(int runs, Fn fn) {
    Measured best;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        const double cpu0 = threadCpuMs();
        const std::uint64_t tokens = fn();
        const double cpu_ms = threadCpuMs() - cpu0;
        const double ms = msSince(t0);
        if (ms < best.ms) best = {ms, tokens, best.cpu_ms};
        best.cpu_ms = std::min(best.cpu_ms, cpu_ms);
    }
    return best;
}

// Counting without the segment cache, so repeated runs measure tokenization.
TokenCounterLimits noSegmentCache() {
    TokenCounterLimits limits;
    limits.min_cached_segment_bytes = static_cast<std::size_t>(-1);
    return limits;
}

// Cold: load the tokenizer, then count `file` once in 16 KB chunks with a
// fresh counter, as `dpgate tokens` does in a new process. Prints
// {"ms":..,"tokens":..}; the parent runs this several times per corpus.
int coldChild(const std::filesystem::path& dir, const std::string& file) {
    TokenizerLoad loaded = Tokenizer::load(dir);
    if (!loaded.tokenizer) return 1;
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto parts = chunk16k(text);
    const auto t0 = Clock::now();
    const double cpu0 = threadCpuMs();
    TokenCounter counter(loaded.tokenizer, noSegmentCache());
    std::uint64_t total = 0;
    for (const auto part : parts) total += counter.count(part).tokens;
    const double cpu_ms = threadCpuMs() - cpu0;
    const double ms = msSince(t0);
    std::printf("{\"ms\":%.3f,\"cpu_ms\":%.3f,\"tokens\":%llu}\n", ms, cpu_ms, static_cast<unsigned long long>(total));
    return 0;
}

// Median of `runs` cold counts of `file`, each in a fresh process (this program, --cold-child).
Measured coldInFreshProcesses(const std::filesystem::path& dir, const std::string& file, int runs) {
    std::vector<double> ms;
    std::vector<double> cpu_ms;
    std::uint64_t tokens = 0;
    const std::string cmd = std::filesystem::read_symlink("/proc/self/exe").string() + " --tokenizer " + dir.string() +
                            " --cold-child " + file;
    for (int i = 0; i < runs; ++i) {
        FILE* pipe = ::popen(cmd.c_str(), "r");
        char buf[256];
        if (pipe != nullptr && std::fgets(buf, sizeof buf, pipe) != nullptr) {
            const auto j = nlohmann::json::parse(buf);
            ms.push_back(j["ms"].get<double>());
            cpu_ms.push_back(j["cpu_ms"].get<double>());
            tokens = j["tokens"].get<std::uint64_t>();
        }
        if (pipe != nullptr) ::pclose(pipe);
    }
    if (ms.empty()) return {};
    std::sort(ms.begin(), ms.end());
    std::sort(cpu_ms.begin(), cpu_ms.end());
    return {ms[ms.size() / 2], tokens, cpu_ms[cpu_ms.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
    std::filesystem::path dir = std::filesystem::path(DPGATE_SOURCE_DIR) / "local/tokenizer/deepseek-v3";
    if (const char* env = std::getenv("DPGATE_TOKENIZER_DIR")) dir = env;
    bool reference = true;
    std::string only;  // one corpus, for profiling
    std::string cold_child;
    std::string save_corpora;  // writes DIR/<corpus>.txt, for profiling and A/B runs
    int cold_runs = 5;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--tokenizer" && i + 1 < argc) dir = argv[++i];
        else if (arg == "--no-reference") reference = false;
        else if (arg == "--only" && i + 1 < argc) only = argv[++i];
        else if (arg == "--cold-child" && i + 1 < argc) cold_child = argv[++i];
        else if (arg == "--cold-runs" && i + 1 < argc) cold_runs = std::max(1, std::atoi(argv[++i]));
        else if (arg == "--save-corpora" && i + 1 < argc) save_corpora = argv[++i];
    }
    if (!cold_child.empty()) return coldChild(dir, cold_child);

    // Load: first (cold-ish) and best of three; memory right after.
    const long rss_before_kb = statusKb("VmRSS:");
    auto t0 = Clock::now();
    TokenizerLoad loaded = Tokenizer::load(dir);
    const double first_load_ms = msSince(t0);
    if (!loaded.tokenizer) {
        std::fprintf(stderr, "load failed: %s\n", loaded.error.c_str());
        return 1;
    }
    const long rss_after_load_kb = statusKb("VmRSS:");
    const long peak_after_load_kb = statusKb("VmHWM:");
    double best_load_ms = first_load_ms;
    for (int i = 0; i < 2; ++i) {
        t0 = Clock::now();
        TokenizerLoad again = Tokenizer::load(dir);
        best_load_ms = std::min(best_load_ms, msSince(t0));
    }
    const auto tokenizer = loaded.tokenizer;
    std::printf("tokenizer load: first %.1f ms, best %.1f ms (target <= 300 ms)\n", first_load_ms, best_load_ms);
    std::printf("resident memory: %.1f MB before load, %.1f MB after load, peak %.1f MB (target <= 64 MB)\n\n",
                rss_before_kb / 1024.0, rss_after_load_kb / 1024.0, peak_after_load_kb / 1024.0);

    constexpr std::size_t kBytes = 4u << 20;
    Rng rng{0x9e3779b97f4a7c15ull};
    const auto lexicon = makeLexicon(rng, 20000);
    struct Corpus {
        const char* name;
        std::string text;
    };
    std::vector<Corpus> corpora;
    corpora.push_back({"english", generate(kBytes, [&] { return englishParagraph(rng, lexicon); })});
    corpora.push_back({"chinese", generate(kBytes, [&] { return chineseParagraph(rng); })});
    corpora.push_back({"code", generate(kBytes, [&] { return codeBlock(rng, lexicon); })});
    corpora.push_back({"chat", generate(kBytes, [&] { return chatTurn(rng, lexicon); })});
    {
        dpgate::bench::SystemCorpus system = dpgate::bench::systemCorpus(kBytes);
        std::printf(
            "system corpus: %.2f MB from this machine: %zu man pages (%.2f MB) in %zu languages, %zu headers (%.2f "
            "MB); hash64 %016llx\n\n",
            system.text.size() / 1e6, system.man_files, system.man_bytes / 1e6, system.languages, system.header_files,
            system.header_bytes / 1e6, static_cast<unsigned long long>(hash64(system.text)));
        corpora.push_back({"system", std::move(system.text)});
    }

    if (!save_corpora.empty()) {
        std::filesystem::create_directories(save_corpora);
        for (const Corpus& c : corpora)
            std::ofstream(std::filesystem::path(save_corpora) / (std::string(c.name) + ".txt"), std::ios::binary)
                << c.text;
    }
    if (!only.empty()) {
        std::erase_if(corpora, [&](const Corpus& c) { return c.name != only; });
    }
    const std::filesystem::path tmp =
        std::filesystem::temp_directory_path() / ("dpgate-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(tmp);
    std::vector<std::string> files;
    for (const Corpus& c : corpora) {
        const auto path = tmp / (std::string(c.name) + ".txt");
        std::ofstream(path, std::ios::binary) << c.text;
        files.push_back(path.string());
    }

    struct Row {
        const char* name;
        std::size_t bytes;
        double sum_mbs, chunk_mbs, whole_mbs, cold_mbs, cold_cpu_mbs, warm_mbs;
        std::uint64_t chunk_tokens, whole_tokens;
    };
    std::vector<Row> rows;
    for (std::size_t ci = 0; ci < corpora.size(); ++ci) {
        const Corpus& c = corpora[ci];
        const Measured sum = bestOf(5, [&] {
            std::uint64_t s = 0;
            for (const char ch : c.text) s += static_cast<unsigned char>(ch);
            sink = s;  // keeps the pass from being optimised away
            return s;
        });
        const auto parts = chunk16k(c.text);
        // Fresh counters each run: the word cache starts cold, as for a new process.
        const Measured chunked = bestOf(3, [&] {
            TokenCounter counter(tokenizer, noSegmentCache());
            std::uint64_t total = 0;
            for (const auto part : parts) total += counter.count(part).tokens;
            return total;
        });
        const Measured whole = bestOf(3, [&] {
            TokenCounter counter(tokenizer, noSegmentCache());
            return counter.count(c.text).tokens;
        });
        // Warm: the same text again through the counter that just counted it
        // (word cache full of its words; segment cache still off).
        const Measured warm = [&] {
            TokenCounter counter(tokenizer, noSegmentCache());
            for (const auto part : parts) (void)counter.count(part);
            return bestOf(3, [&] {
                std::uint64_t total = 0;
                for (const auto part : parts) total += counter.count(part).tokens;
                return total;
            });
        }();
        const Measured cold = coldInFreshProcesses(dir, files[ci], cold_runs);
        if (cold.tokens != chunked.tokens || warm.tokens != chunked.tokens)
            std::printf("%s: cold/warm counts differ from the first pass!\n", c.name);
        rows.push_back({c.name, c.text.size(), mbPerS(c.text.size(), sum.ms), mbPerS(c.text.size(), chunked.ms),
                        mbPerS(c.text.size(), whole.ms), mbPerS(c.text.size(), cold.ms),
                        mbPerS(c.text.size(), cold.cpu_ms), mbPerS(c.text.size(), warm.cpu_ms), chunked.tokens,
                        whole.tokens});
    }

    std::printf(
        "16 KB chunks: cold = first pass in a fresh process (median of %d; wall time, and CPU time of the counting\n"
        "thread), first = fresh counter in this process (best of 3, wall), warm = second pass through the same\n"
        "counter (best of 3, CPU time)\n",
        cold_runs);
    std::printf("%-8s %9s %9s %10s %9s %10s %10s %10s %8s\n", "corpus", "tokens", "sum MB/s", "cold MB/s", "cold cpu",
                "first MB/s", "warm cpu", "4MB MB/s", "vs sum");
    for (const Row& r : rows) {
        std::printf("%-8s %9llu %9.0f %10.1f %9.1f %10.1f %10.1f %10.1f %7.1fx\n", r.name,
                    static_cast<unsigned long long>(r.whole_tokens), r.sum_mbs, r.cold_mbs, r.cold_cpu_mbs, r.chunk_mbs,
                    r.warm_mbs, r.whole_mbs, r.sum_mbs / r.whole_mbs);
    }

    // The per-character shortcut (bpe_char_premerge.cpp) must change no id:
    // every piece of every corpus, BPE'd from its bytes and with the shortcut.
    {
        const BpeModel& model = tokenizer->model();
        std::size_t pieces = 0;
        std::size_t differ = 0;
        std::vector<std::uint32_t> ends, fast, slow;
        // Besides the corpora: every character of the shortcut's range, each
        // followed by 0-2 random neighbours (ideographs, kana, CJK punctuation,
        // ASCII, other BMP text), so rare characters meet many neighbours too.
        std::vector<std::string> texts;
        for (const Corpus& c : corpora) texts.push_back(c.text);
        Rng mix{7};
        for (int round = 0; round < 3; ++round) {
            std::string text;
            for (std::uint32_t cp = BpeModel::kCharPremergeFirst; cp <= BpeModel::kCharPremergeLast; ++cp) {
                appendUtf8(text, cp);
                for (std::size_t k = mix.below(3); k > 0; --k) {
                    const std::size_t kind = mix.below(10);
                    std::uint32_t n = kind < 6   ? 0x4e00 + static_cast<std::uint32_t>(mix.below(0x9fa6 - 0x4e00))
                                      : kind < 7 ? 0x3040 + static_cast<std::uint32_t>(mix.below(0xc0))
                                      : kind < 8 ? 0x3000 + static_cast<std::uint32_t>(mix.below(0x40))
                                      : kind < 9 ? 0x20 + static_cast<std::uint32_t>(mix.below(0x5f))
                                                 : 0x80 + static_cast<std::uint32_t>(mix.below(0x2000));
                    appendUtf8(text, n);
                }
            }
            texts.push_back(std::move(text));
        }
        for (const std::string& text : texts) {
            ends.clear();
            splitDeepSeekV3(text, ends);
            std::uint32_t start = 0;
            for (const std::uint32_t end : ends) {
                const std::string_view piece = std::string_view(text).substr(start, end - start);
                start = end;
                fast.clear();
                slow.clear();
                model.encodePiece(piece, fast);
                model.encodePieceFromBytes(piece, slow);
                ++pieces;
                if (fast != slow) ++differ;
            }
        }
        std::printf(
            "\nper-character shortcut: %zu CJK characters premerged; %zu pieces checked, %zu differ from plain BPE\n",
            model.premergedCharCount(), pieces, differ);
    }

    if (reference) {
        std::string cmd =
            "node " +
            (std::filesystem::path(DPGATE_SOURCE_DIR) / "tests/bench/tokenizer/reference_bench.mjs").string() + " " +
            (dir / "tokenizer.json").string();
        for (const auto& f : files) cmd += " " + f;
        std::printf("\nreference (HuggingFace tokenizers via node, same text):\n");
        std::fflush(stdout);
        FILE* pipe = ::popen(cmd.c_str(), "r");
        char buf[4096];
        std::size_t i = 0;
        bool all_equal = true;
        std::printf("%-8s %12s %12s %12s %8s %10s %8s %8s %8s %s\n", "corpus", "ref 16KB", "ref cpu", "ref 4MB",
                    "cold x", "cold cpu x", "first x", "warm cpu x", "4MB x", "counts");
        while (pipe != nullptr && std::fgets(buf, sizeof buf, pipe) != nullptr && i < rows.size()) {
            const auto j = nlohmann::json::parse(buf);
            const Row& r = rows[i++];
            const double ref_chunk = mbPerS(r.bytes, j["chunkMs"].get<double>());
            const double ref_whole = mbPerS(r.bytes, j["wholeMs"].get<double>());
            const double ref_cpu = mbPerS(r.bytes, j["chunkCpuMs"].get<double>());
            const bool equal = j["chunkTokens"].get<std::uint64_t>() == r.chunk_tokens &&
                               j["wholeTokens"].get<std::uint64_t>() == r.whole_tokens;
            all_equal = all_equal && equal;
            std::printf("%-8s %7.2f MB/s %7.2f MB/s %7.2f MB/s %7.1fx %9.1fx %7.1fx %7.1fx %7.1fx %s\n", r.name,
                        ref_chunk, ref_cpu, ref_whole, r.cold_mbs / ref_chunk, r.cold_cpu_mbs / ref_cpu,
                        r.chunk_mbs / ref_chunk, r.warm_mbs / ref_cpu, r.whole_mbs / ref_whole,
                        equal ? "identical" : "DIFFERENT");
        }
        if (pipe != nullptr) ::pclose(pipe);
        if (i != rows.size()) std::printf("reference run incomplete (node missing?)\n");
        std::printf("token counts %s the reference\n",
                    all_equal && i == rows.size() ? "identical to" : "NOT identical to");
    }
    std::filesystem::remove_all(tmp);

    // Next turn of a ~1M-token conversation, the whole admission path: the
    // body scanned, rendered with the model's chat template as vLLM renders it,
    // and counted; the previous turn was counted by the same Admitter, so only
    // the new messages' text is tokenized.
    std::string error;
    ChatTemplate::LoadOptions template_options;
    template_options.tokenizer = dir;
    const auto chat_template = ChatTemplate::load(template_options, error);
    if (!chat_template) {
        std::printf("chat template: %s\n", error.c_str());
        return 1;
    }
    nlohmann::json conversation = nlohmann::json::array();
    auto add = [&](std::string_view role, std::string text) {
        conversation.push_back({{"role", role}, {"content", std::move(text)}});
    };
    auto body = [&] { return nlohmann::json{{"model", "ds-v4.1-flash-1017"}, {"messages", conversation}}.dump(); };
    add("system", "You are a helpful assistant.");
    Admitter admitter(tokenizer, chat_template);
    std::uint64_t tokens = 0;
    Rng conv{42};
    while (tokens < 1000000) {
        for (int i = 0; i < 16; ++i) {
            add("user", generate(12000, [&] { return chatTurn(conv, lexicon); }));
            add("assistant", generate(4000, [&] { return chatTurn(conv, lexicon); }));
        }
        Admitter sizing(tokenizer, chat_template);
        tokens = sizing.countChat(body()).prompt_tokens;
    }
    add("user", "And now?");
    // Bodies are padded as the gateway's request buffers are (no copy to scan).
    auto padded = [](std::string text) {
        const std::size_t size = text.size();
        text.reserve(size + kScanPaddingBytes);
        return std::pair{std::move(text), size};
    };
    std::vector<std::string> bodies{body()};
    // First count in a fresh process: a new Admitter (cold word cache, no
    // buffers yet).
    t0 = Clock::now();
    const Admitter::ChatCount cold = admitter.countChat(bodies.back());
    const double cold_ms = msSince(t0);
    // First count in a running gateway: an Admitter that has counted another
    // 1M-token conversation, of other words (its buffers are sized, its word
    // cache holds none of these words).
    double warm_process_ms = 0;
    {
        Rng other_rng{0x51ed2701u};
        const auto other_lexicon = makeLexicon(other_rng, 20000);
        nlohmann::json other = nlohmann::json::array();
        other.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
        while (other.size() < conversation.size()) {
            other.push_back(
                {{"role", "user"}, {"content", generate(12000, [&] { return chatTurn(other_rng, other_lexicon); })}});
            other.push_back({{"role", "assistant"},
                             {"content", generate(4000, [&] { return chatTurn(other_rng, other_lexicon); })}});
        }
        Admitter running(tokenizer, chat_template);
        (void)running.countChat(nlohmann::json{{"model", "ds-v4.1-flash-1017"}, {"messages", other}}.dump());
        t0 = Clock::now();
        const Admitter::ChatCount first = running.countChat(bodies.back());
        warm_process_ms = msSince(t0);
        if (first.prompt_tokens != cold.prompt_tokens) std::printf("counts differ between Admitters!\n");
    }
    std::vector<double> next_ms;
    std::vector<std::uint64_t> counts{cold.prompt_tokens};
    for (int turn = 0; turn < 10; ++turn) {
        add("assistant", generate(3000, [&] { return chatTurn(conv, lexicon); }));
        add("user", generate(2000, [&] { return chatTurn(conv, lexicon); }));
        auto [text, size] = padded(body());
        bodies.push_back(text);
        t0 = Clock::now();
        const Admitter::ChatCount next = admitter.countChat(std::string_view(text.data(), size), text.capacity());
        next_ms.push_back(msSince(t0));
        counts.push_back(next.prompt_tokens);
        if (!next.ok) std::printf("count failed: %s\n", next.error.c_str());
    }
    std::printf("\nnext-turn times (ms):");
    for (const double ms : next_ms) std::printf(" %.2f", ms);
    std::printf("\n");
    std::sort(next_ms.begin(), next_ms.end());
    std::printf("\nconversation: %llu tokens, %.1f MB body, %zu messages\n",
                static_cast<unsigned long long>(cold.prompt_tokens), bodies.front().size() / 1e6, conversation.size());
    std::printf(
        "first count: %.1f ms in a fresh process, %.1f ms in a running one (new words either way; target <= 80 ms)\n",
        cold_ms, warm_process_ms);
    std::printf("next turn (new ~5 KB): median %.2f ms, max %.2f ms (target <= 5 ms)\n", next_ms[next_ms.size() / 2],
                next_ms.back());
    // The same bodies rendered by the Jinja engine instead of DeepSeek V3's
    // native rendering: what a template dpgate has no native rendering for
    // (a model.chat_template, another model's) costs.
    {
        Admitter engine(tokenizer, chat_template);
        engine.setNativeRendering(false);
        std::vector<double> engine_ms;
        bool same = true;
        for (std::size_t i = 0; i < bodies.size(); ++i) {
            const std::string& b = bodies[i];
            t0 = Clock::now();
            const Admitter::ChatCount c = engine.countChat(b);
            engine_ms.push_back(msSince(t0));
            same = same && c.ok && c.prompt_tokens == counts[i];
        }
        const double first_ms = engine_ms.front();
        std::vector<double> rest(engine_ms.begin() + 1, engine_ms.end());
        std::sort(rest.begin(), rest.end());
        std::printf("by the Jinja engine (no native rendering): first %.1f ms, next turn median %.2f ms; counts %s\n",
                    first_ms, rest[rest.size() / 2], same ? "identical" : "DIFFERENT");
    }
    if (reference) {
        // The same bodies through @huggingface/jinja + HF tokenizers.
        const auto bodies_file =
            std::filesystem::temp_directory_path() / ("dpgate-bench-bodies-" + std::to_string(::getpid()) + ".jsonl");
        {
            std::ofstream out(bodies_file, std::ios::binary);
            for (const std::string& b : bodies) out << b << "\n";
        }
        const std::string cmd =
            "node " +
            (std::filesystem::path(DPGATE_SOURCE_DIR) / "tests/bench/tokenizer/reference_chat_bench.mjs").string() +
            " " + dir.string() + " " + bodies_file.string();
        FILE* pipe = ::popen(cmd.c_str(), "r");
        char buf[4096];
        std::vector<double> ref_ms;
        bool equal = true;
        while (pipe != nullptr && std::fgets(buf, sizeof buf, pipe) != nullptr) {
            const auto j = nlohmann::json::parse(buf);
            if (ref_ms.size() < counts.size() && j["tokens"].get<std::uint64_t>() != counts[ref_ms.size()])
                equal = false;
            ref_ms.push_back(j["ms"].get<double>());
        }
        if (pipe != nullptr) ::pclose(pipe);
        std::filesystem::remove(bodies_file);
        if (ref_ms.size() == counts.size()) {
            std::vector<double> ref_next(ref_ms.begin() + 1, ref_ms.end());
            std::sort(ref_next.begin(), ref_next.end());
            std::printf(
                "reference (@huggingface/jinja + HF tokenizers, same bodies): first %.1f ms, next turn median %.1f "
                "ms\n",
                ref_ms.front(), ref_next[ref_next.size() / 2]);
            std::printf("dpgate vs reference: first %.1fx faster, next turn %.0fx faster; counts %s\n",
                        ref_ms.front() / cold_ms, ref_next[ref_next.size() / 2] / next_ms[next_ms.size() / 2],
                        equal ? "identical" : "DIFFERENT");
        } else {
            std::printf("reference run incomplete (node missing?)\n");
        }
    }
    std::printf("\nresident memory at end: %.1f MB (texts and conversation included), peak %.1f MB\n",
                statusKb("VmRSS:") / 1024.0, statusKb("VmHWM:") / 1024.0);
    return 0;
}
