// dpgate-bench-count-cache: 200 long conversations
// (100k-1M tokens each) interleaved through one Admitter, as one gateway
// worker sees them. Reports, per cache bound: the segment cache's hit ratio,
// the caches' own accounting (never above the bound) beside the process's
// RSS, next-turn count times for conversations still in cache and for
// evicted ones, and whether every sampled count equals a fresh count.
//
// Message text is cut from the system corpus (system_corpus.hpp), each
// message prefixed by its conversation and position so that no two
// conversations share a segment. Bodies are rebuilt per turn and only the
// count (scan, render, count) is timed.
//
// Then the same conversations through two workers' Admitters, each turn on
// either worker, without and with the cache the workers share.
//
//   dpgate-bench-count-cache [--tokenizer DIR] [--conversations N] [--rounds N] [--bounds-mib A,B,...]
//                            [--no-old-policy] [--no-workers]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "admission/admit.hpp"
#include "admission/request_scan.hpp"
#include "admission/template/chat_template.hpp"
#include "system_corpus.hpp"

namespace {

using namespace dpgate::admission;
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

struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
    // Log-uniform in [lo, hi]: many short messages, some long ones.
    std::size_t logUniform(std::size_t lo, std::size_t hi) {
        const double u = static_cast<double>(next() >> 11) / 9007199254740992.0;
        return static_cast<std::size_t>(static_cast<double>(lo) *
                                        std::pow(static_cast<double>(hi) / static_cast<double>(lo), u));
    }
};

struct Message {
    std::uint32_t offset;
    std::uint32_t bytes;
};

struct Conversation {
    std::uint32_t id;
    std::vector<Message> messages;
    std::uint64_t tokens = 0;
};

class Pool {
public:
    explicit Pool(std::string text) : text_(std::move(text)) {}
    // A message of about `bytes` bytes at a random offset, cut on characters.
    Message take(Rng& rng, std::size_t bytes) const {
        bytes = std::min(bytes, text_.size() / 2);
        std::size_t start = rng.below(text_.size() - bytes);
        while (start > 0 && isContinuation(start)) --start;
        std::size_t end = start + bytes;
        while (end < text_.size() && isContinuation(end)) ++end;
        return {static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(end - start)};
    }
    std::string_view view(const Message& m) const { return std::string_view(text_).substr(m.offset, m.bytes); }

private:
    bool isContinuation(std::size_t i) const { return (static_cast<unsigned char>(text_[i]) & 0xc0) == 0x80; }
    std::string text_;
};

void appendJsonString(std::string& out, std::string_view text) {
    out += nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The chat completions body of a conversation, padded for the scanner.
std::string body(const Conversation& c, const Pool& pool) {
    std::string out =
        R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"system","content":"You are a helpful assistant."})";
    for (std::size_t i = 0; i < c.messages.size(); ++i) {
        out += i % 2 == 0 ? R"(,{"role":"user","content":)" : R"(,{"role":"assistant","content":)";
        std::string text = "[conversation " + std::to_string(c.id) + ", message " + std::to_string(i) + "]\n";
        text += pool.view(c.messages[i]);
        appendJsonString(out, text);
        out += '}';
    }
    // Ends on a user turn, as a request does.
    if (c.messages.size() % 2 == 0) out += R"(,{"role":"user","content":"Go on."})";
    out += "]}";
    out.reserve(out.size() + kScanPaddingBytes);
    return out;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

struct Options {
    std::filesystem::path dir;
    std::size_t conversations = 200;
    int rounds = 4;
    std::vector<std::size_t> bounds_mib{256, 8};
};

// One run at one bound: fill, then `rounds` next turns per conversation.
void run(const Options& options, std::size_t bound_bytes, const std::string& label,
         const std::shared_ptr<const Tokenizer>& tokenizer, const std::shared_ptr<const ChatTemplate>& chat_template,
         const Pool& pool, std::size_t entries_cap) {
    TokenCounterLimits limits;
    limits.cache_bytes = bound_bytes;
    limits.segment_cache_entries = entries_cap;
    Admitter admitter(tokenizer, chat_template, {}, limits);
    const TokenCounter& counter = *admitter.counter();
    Rng rng{0x243f6a8885a308d3ull};
    std::vector<Conversation> conversations(options.conversations);
    std::size_t max_accounted = 0;
    auto track = [&] { max_accounted = std::max(max_accounted, counter.cacheBytes()); };

    // Fill: every conversation counted once at its full length (first contact).
    const auto fill_t0 = Clock::now();
    std::vector<std::uint64_t> targets;
    for (std::size_t i = 0; i < conversations.size(); ++i) {
        Conversation& c = conversations[i];
        c.id = static_cast<std::uint32_t>(i);
        const std::uint64_t target = 100000 + rng.below(900001);
        // ~3.2 bytes per token on this text; the count below is the exact figure.
        const std::size_t target_bytes = static_cast<std::size_t>(static_cast<double>(target) * 3.2);
        std::size_t bytes = 0;
        while (bytes < target_bytes) {
            c.messages.push_back(pool.take(rng, rng.logUniform(200, 16000)));
            bytes += c.messages.back().bytes;
        }
        const std::string b = body(c, pool);
        const Admitter::ChatCount count = admitter.countChat(std::string_view(b.data(), b.size()), b.capacity());
        if (!count.ok) {
            std::printf("count failed: %s\n", count.error.c_str());
            return;
        }
        c.tokens = count.prompt_tokens;
        track();
    }
    const double fill_s = msSince(fill_t0) / 1e3;
    std::vector<std::uint64_t> sizes;
    std::size_t messages = 0;
    for (const Conversation& c : conversations) {
        sizes.push_back(c.tokens);
        messages += c.messages.size();
    }
    std::sort(sizes.begin(), sizes.end());

    // Next turns, interleaved: each round visits every conversation once in a
    // new order and adds an assistant answer and a user message.
    const std::uint64_t hits0 = counter.segmentCache().hits();
    const std::uint64_t misses0 = counter.segmentCache().misses();
    std::vector<double> in_cache_ms, evicted_ms, in_cache_cpu_ms;
    std::size_t checked = 0, differ = 0;
    std::vector<std::size_t> order(conversations.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (int round = 0; round < options.rounds; ++round) {
        for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
        for (const std::size_t index : order) {
            Conversation& c = conversations[index];
            c.messages.push_back(pool.take(rng, rng.logUniform(500, 4000)));
            c.messages.push_back(pool.take(rng, rng.logUniform(200, 2000)));
            const std::string b = body(c, pool);
            const std::uint64_t misses_before = counter.segmentCache().misses();
            const auto t0 = Clock::now();
            const double cpu0 = threadCpuMs();
            const Admitter::ChatCount count = admitter.countChat(std::string_view(b.data(), b.size()), b.capacity());
            const double cpu_ms = threadCpuMs() - cpu0;
            const double ms = msSince(t0);
            track();
            // Still in cache: only the turn's new segments (at most the two
            // messages and the closing user turn) were counted.
            if (counter.segmentCache().misses() - misses_before <= 3) {
                in_cache_ms.push_back(ms);
                in_cache_cpu_ms.push_back(cpu_ms);
            } else {
                evicted_ms.push_back(ms);
            }
            if ((round * conversations.size() + index) % 25 == 0) {
                Admitter fresh(tokenizer, chat_template);
                ++checked;
                if (fresh.countChat(b).prompt_tokens != count.prompt_tokens) ++differ;
            }
            c.tokens = count.prompt_tokens;
        }
    }
    const std::uint64_t hits = counter.segmentCache().hits() - hits0;
    const std::uint64_t misses = counter.segmentCache().misses() - misses0;
    const std::size_t turns = in_cache_ms.size() + evicted_ms.size();
    std::printf("\n[%s] bound %.1f MiB%s\n", label.c_str(), static_cast<double>(bound_bytes) / (1 << 20),
                entries_cap != 0 ? (" and " + std::to_string(entries_cap) + " segment entries").c_str() : "");
    std::printf("  %zu conversations, %zu messages, tokens min %llu median %llu max %llu; fill (first counts) %.1f s\n",
                conversations.size(), messages, static_cast<unsigned long long>(sizes.front()),
                static_cast<unsigned long long>(sizes[sizes.size() / 2]), static_cast<unsigned long long>(sizes.back()),
                fill_s);
    std::printf(
        "  next turns: %zu; segment hit ratio %.2f%% (%llu hits, %llu misses); %zu still in cache, %zu evicted\n",
        turns, 100.0 * static_cast<double>(hits) / static_cast<double>(std::max<std::uint64_t>(1, hits + misses)),
        static_cast<unsigned long long>(hits), static_cast<unsigned long long>(misses), in_cache_ms.size(),
        evicted_ms.size());
    std::printf(
        "  next-turn ms, still in cache: median %.2f, p99 %.2f, max %.2f (target < 5 ms); CPU ms median %.2f, p99 "
        "%.2f\n",
        percentile(in_cache_ms, 0.5), percentile(in_cache_ms, 0.99), percentile(in_cache_ms, 1.0),
        percentile(in_cache_cpu_ms, 0.5), percentile(in_cache_cpu_ms, 0.99));
    if (!evicted_ms.empty())
        std::printf("  next-turn ms, evicted (recounted): median %.2f, p99 %.2f\n", percentile(evicted_ms, 0.5),
                    percentile(evicted_ms, 0.99));
    std::printf(
        "  caches' accounting: now %.1f MiB (word %.1f MiB + segment %.1f MiB, %zu entries, %llu rotations), max %.1f "
        "MiB, bound %.1f MiB%s\n",
        counter.cacheBytes() / 1048576.0, (counter.cacheBytes() - counter.segmentCache().memoryBytes()) / 1048576.0,
        counter.segmentCache().memoryBytes() / 1048576.0, counter.segmentCache().size(),
        static_cast<unsigned long long>(counter.segmentCache().rotations()), max_accounted / 1048576.0,
        static_cast<double>(bound_bytes) / (1 << 20), max_accounted <= bound_bytes ? "" : "  EXCEEDED");
    std::printf(
        "  RSS now %.1f MB, peak %.1f MB (process: tokenizer, text pool, one body and the Admitter's buffers "
        "included)\n",
        statusKb("VmRSS:") / 1024.0, statusKb("VmHWM:") / 1024.0);
    std::printf("  counts: %zu sampled next turns recounted by a fresh Admitter, %zu differ\n", checked, differ);
}

// Two gateway workers: each turn of a conversation lands on either (a new
// connection goes to any worker), each worker's Admitter has its own caches,
// and with `shared` both consult the cache the gateway's workers share
// (Server::sharedSegments: half the bound; each worker's own caches split
// the other half). Without it each worker has half the bound to itself.
// Reports next-turn times for turns that stay on the conversation's last
// worker and for turns that move, and checks sampled counts.
void runWorkers(const Options& options, std::size_t bound_bytes, bool shared,
                const std::shared_ptr<const Tokenizer>& tokenizer,
                const std::shared_ptr<const ChatTemplate>& chat_template, const Pool& pool) {
    auto shared_cache = shared ? std::make_shared<SharedSegmentCache>(bound_bytes / 2) : nullptr;
    TokenCounterLimits limits;
    limits.cache_bytes = shared ? bound_bytes / 4 : bound_bytes / 2;
    limits.shared_segments = shared_cache;
    Admitter workers[2] = {Admitter(tokenizer, chat_template, {}, limits),
                           Admitter(tokenizer, chat_template, {}, limits)};
    Rng rng{0x13198a2e03707344ull};
    std::vector<Conversation> conversations(options.conversations);
    std::vector<int> last(conversations.size());
    for (std::size_t i = 0; i < conversations.size(); ++i) {
        Conversation& c = conversations[i];
        c.id = static_cast<std::uint32_t>(i);
        const std::size_t target_bytes =
            static_cast<std::size_t>(static_cast<double>(100000 + rng.below(900001)) * 3.2);
        for (std::size_t bytes = 0; bytes < target_bytes; bytes += c.messages.back().bytes)
            c.messages.push_back(pool.take(rng, rng.logUniform(200, 16000)));
        last[i] = static_cast<int>(rng.below(2));
        const std::string b = body(c, pool);
        if (!workers[last[i]].countChat(std::string_view(b.data(), b.size()), b.capacity()).ok) return;
    }
    std::vector<double> stayed_ms, moved_ms;
    std::size_t checked = 0, differ = 0;
    for (int round = 0; round < options.rounds; ++round) {
        for (std::size_t i = 0; i < conversations.size(); ++i) {
            Conversation& c = conversations[i];
            c.messages.push_back(pool.take(rng, rng.logUniform(500, 4000)));
            c.messages.push_back(pool.take(rng, rng.logUniform(200, 2000)));
            const std::string b = body(c, pool);
            const int worker = static_cast<int>(rng.below(2));
            const auto t0 = Clock::now();
            const Admitter::ChatCount count =
                workers[worker].countChat(std::string_view(b.data(), b.size()), b.capacity());
            (worker == last[i] ? stayed_ms : moved_ms).push_back(msSince(t0));
            last[i] = worker;
            if ((round * conversations.size() + i) % 25 == 0) {
                Admitter fresh(tokenizer, chat_template);
                ++checked;
                if (fresh.countChat(b).prompt_tokens != count.prompt_tokens) ++differ;
            }
        }
    }
    std::printf("\n[two workers, %s] bound %.1f MiB\n", shared ? "shared cache" : "no shared cache",
                static_cast<double>(bound_bytes) / (1 << 20));
    std::printf("  next turns on the conversation's last worker: %zu, ms median %.2f, p99 %.2f\n", stayed_ms.size(),
                percentile(stayed_ms, 0.5), percentile(stayed_ms, 0.99));
    std::printf("  next turns on the other worker:               %zu, ms median %.2f, p99 %.2f\n", moved_ms.size(),
                percentile(moved_ms, 0.5), percentile(moved_ms, 0.99));
    std::size_t own_bytes = 0;
    for (const Admitter& w : workers) own_bytes += w.counter()->cacheBytes();
    const std::size_t shared_bytes = shared_cache ? shared_cache->memoryBytes() : 0;
    std::printf("  caches' accounting: workers' own %.1f MiB + shared %.1f MiB = %.1f MiB, bound %.1f MiB%s\n",
                own_bytes / 1048576.0, shared_bytes / 1048576.0, (own_bytes + shared_bytes) / 1048576.0,
                static_cast<double>(bound_bytes) / (1 << 20),
                own_bytes + shared_bytes <= bound_bytes ? "" : "  EXCEEDED");
    if (shared_cache)
        std::printf("  shared cache: %llu hits, %llu misses\n", static_cast<unsigned long long>(shared_cache->hits()),
                    static_cast<unsigned long long>(shared_cache->misses()));
    std::printf("  counts: %zu sampled next turns recounted by a fresh Admitter, %zu differ\n", checked, differ);
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    options.dir = std::filesystem::path(DPGATE_SOURCE_DIR) / "local/tokenizer/deepseek-v3";
    if (const char* env = std::getenv("DPGATE_TOKENIZER_DIR")) options.dir = env;
    bool old_policy = true;
    bool two_workers = true;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--tokenizer" && i + 1 < argc) options.dir = argv[++i];
        else if (arg == "--conversations" && i + 1 < argc) options.conversations = std::stoul(argv[++i]);
        else if (arg == "--rounds" && i + 1 < argc) options.rounds = std::atoi(argv[++i]);
        else if (arg == "--no-old-policy") old_policy = false;
        else if (arg == "--no-workers") two_workers = false;
        else if (arg == "--bounds-mib" && i + 1 < argc) {
            options.bounds_mib.clear();
            std::stringstream list(argv[++i]);
            std::string item;
            while (std::getline(list, item, ',')) options.bounds_mib.push_back(std::stoul(item));
        }
    }
    const TokenizerLoad loaded = Tokenizer::load(options.dir);
    if (!loaded.tokenizer) {
        std::fprintf(stderr, "load failed: %s\n", loaded.error.c_str());
        return 1;
    }
    std::string error;
    ChatTemplate::LoadOptions template_options;
    template_options.tokenizer = options.dir;
    const auto chat_template = ChatTemplate::load(template_options, error);
    if (!chat_template) {
        std::fprintf(stderr, "chat template: %s\n", error.c_str());
        return 1;
    }
    const Pool pool(dpgate::bench::systemCorpus(8u << 20).text);
    std::printf("count caches under %zu interleaved conversations of 100k-1M tokens, %d next turns each\n",
                options.conversations, options.rounds);
    std::printf("RSS after load: %.1f MB\n", statusKb("VmRSS:") / 1024.0);
    for (const std::size_t mib : options.bounds_mib)
        run(options, mib << 20, "bytes bound", loaded.tokenizer, chat_template, pool, 0);
    // The peer policy: a 16,384-entry segment cache, bounded by entries instead of bytes.
    if (old_policy)
        run(options, std::size_t{256} << 20, "before: 16384 entries", loaded.tokenizer, chat_template, pool, 16384);
    if (two_workers) {
        for (const bool shared : {false, true})
            runWorkers(options, std::size_t{256} << 20, shared, loaded.tokenizer, chat_template, pool);
    }
    return 0;
}
