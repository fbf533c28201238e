// Admission speed and memory, beside an nlohmann::json DOM parse of
// the same body: the proxy benchmark's small request (the same body again
// and again, and a new text each time), 2 KB chat request, 128 MB body with
// 640 base64 images, 100 MB body with 10 images, an agent's next turn (long
// system prompt and tools), 1M-token text request cold and on its next turn.
// Beside admit (the fast JSON validation: simdjson's stage 1, the depth
// counted over its structural index, the readers checking what they read
// and what they skip): admit with the plain JSON validation
// (Admitter::setFastJsonValidation(false): JsonValidator reads every byte
// first), and JsonValidator alone. compare_admission.py sets two builds
// side by side (before and after a change).
//
//   dpgate-bench-admission [--only small|images|agent|conversation]
//
// `--only small` under callgrind gives instructions per admit:
//   valgrind --tool=callgrind --toggle-collect='dpgate::admission::Admitter::admit*'
//            build/bin/dpgate-bench-admission --only small
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "admission/admit.hpp"
#include "admission/json_validator.hpp"

using namespace dpgate::admission;
using Clock = std::chrono::steady_clock;

namespace {

double rssMb() {
    std::ifstream statm("/proc/self/statm");
    long pages = 0, resident = 0;
    statm >> pages >> resident;
    return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

std::string padded(std::string body) {
    body.reserve(body.size() + kScanPaddingBytes);
    return body;
}

template <typename F>
double bestUs(int runs, F&& f) {
    double best = 1e18;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        f();
        best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    return best;
}

std::string text(std::mt19937& rng, std::size_t bytes) {
    static const char* words[] = {"the",     "model",   "gateway", "tokens", "window", "函数",
                                  "données", "request", "42",      "\\n",    "cache",  "😀"};
    std::string out;
    while (out.size() < bytes) {
        out += words[rng() % 12];
        out += (rng() % 9 == 0) ? ". " : " ";
    }
    return out;
}

std::string conversation(std::mt19937& rng, int turns, std::size_t bytes_per_turn) {
    std::string body = R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"system","content":"You are helpful."})";
    for (int i = 0; i < turns; ++i) {
        body += R"(,{"role":")";
        body += (i % 2 == 0) ? "user" : "assistant";
        body += R"(","content":")" + text(rng, bytes_per_turn) + "\"}";
    }
    return body;
}

// The plain validator alone on `body`, best of `runs`.
double validateUs(const std::string& body, int runs) {
    static JsonValidator validator;
    return bestUs(runs, [&] {
        if (validator.validate(body).has_value()) std::abort();
    });
}

// admit() with the plain JSON validation, best of `runs` after one warm-up,
// on an Admitter of its own (the measured one's caches stay as they were).
double plainAdmitUs(const std::shared_ptr<const Tokenizer>& tokenizer,
                    const std::shared_ptr<const ChatTemplate>& chat_template, const std::string& body,
                    const AdmissionLimits& limits, int runs) {
    Admitter admitter(tokenizer, chat_template);
    admitter.setFastJsonValidation(false);
    (void)admitter.admit(body, body.capacity(), Endpoint::chat_completions, limits);
    return bestUs(runs, [&] { (void)admitter.admit(body, body.capacity(), Endpoint::chat_completions, limits); });
}

void row(const char* name, std::size_t bytes, double admit_us, double plain_us, double validate_us, double dom_us,
         const std::string& note) {
    std::printf("%-42s %12zu %10.2f %10.2f %+7.1f%% %10.2f %12.1f %7.2fx  %s\n", name, bytes, admit_us, plain_us,
                100.0 * (plain_us - admit_us) / admit_us, validate_us, dom_us, dom_us / admit_us, note.c_str());
}

std::string describe(const Verdict& v) {
    if (const auto* a = std::get_if<Admitted>(&v)) {
        return "admitted " + std::to_string(a->prompt_tokens) +
               (a->counted ? " tokens (counted)" : " tokens (bound, fast path)");
    }
    return "refused: " + std::get<Refused>(v).message.substr(0, 120);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string only = argc == 3 && std::string(argv[1]) == "--only" ? argv[2] : "";
    if (argc != 1 && only.empty()) {
        std::fprintf(stderr, "usage: dpgate-bench-admission [--only small|images|agent|conversation]\n");
        return 2;
    }
    auto run = [&](const char* group) { return only.empty() || only == group; };
    const auto loaded = Tokenizer::load(DPGATE_SOURCE_DIR "/local/tokenizer/deepseek-v3");
    std::string template_error;
    ChatTemplate::LoadOptions template_options;
    template_options.tokenizer = DPGATE_SOURCE_DIR "/local/tokenizer/deepseek-v3";
    const auto chat_template = ChatTemplate::load(template_options, template_error);
    if (loaded.tokenizer == nullptr) {
        std::fprintf(stderr, "%s\n", loaded.error.c_str());
        return 1;
    }
    AdmissionLimits limits;
    std::mt19937 rng(7);
    std::printf("%-42s %12s %10s %10s %8s %10s %12s %8s  %s\n", "case", "body bytes", "admit us", "plain us", "plain",
                "validate us", "nlohmann us", "ratio", "verdict");

    if (run("small")) {  // The proxy benchmark's body (tests/bench/proxy/bench_post.lua).
        const std::string head =
            R"({"model":"ds-v4.1-flash-1017","max_tokens":16,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":")";
        const std::string same = padded(head + "Say hello to the gateway benchmark in a few words.\"}]}");
        Admitter admitter(loaded.tokenizer, chat_template);
        Verdict v;
        const double us =
            bestUs(1000, [&] { v = admitter.admit(same, same.capacity(), Endpoint::chat_completions, limits); });
        const double dom = bestUs(1000, [&] { (void)nlohmann::json::parse(same).size(); });
        row("small request, same body", same.size(), us,
            plainAdmitUs(loaded.tokenizer, chat_template, same, limits, 1000), validateUs(same, 1000), dom,
            describe(v));
        // A new user text each time: nothing of it is in the counter's caches.
        static const char* words[] = {"say", "hello", "to",  "the",   "gateway", "benchmark",
                                      "in",  "a",     "few", "words", "please",  "now"};
        std::mt19937 words_rng(3);
        std::vector<std::string> bodies;
        for (int i = 0; i < 1000; ++i) {
            std::string user;
            for (int w = 0; w < 9; ++w) (user += words[words_rng() % 12]) += ' ';
            bodies.push_back(padded(head + user + std::to_string(i) + "\"}]}"));
        }
        std::size_t next = 0;
        const double unique_us = bestUs(1000, [&] {
            const std::string& b = bodies[next++];
            v = admitter.admit(b, b.capacity(), Endpoint::chat_completions, limits);
        });
        next = 0;
        const double unique_dom = bestUs(1000, [&] { (void)nlohmann::json::parse(bodies[next++]).size(); });
        // Texts of its own for the plain run: the first run's are in the caches now.
        std::vector<std::string> plain_bodies;
        for (int i = 0; i < 1000; ++i) {
            std::string user;
            for (int w = 0; w < 9; ++w) (user += words[words_rng() % 12]) += ' ';
            plain_bodies.push_back(padded(head + user + "p" + std::to_string(i) + "\"}]}"));
        }
        Admitter plain(loaded.tokenizer, chat_template);
        plain.setFastJsonValidation(false);
        next = 0;
        const double unique_plain = bestUs(1000, [&] {
            const std::string& b = plain_bodies[next++];
            (void)plain.admit(b, b.capacity(), Endpoint::chat_completions, limits);
        });
        row("small request, new text each time", bodies[0].size(), unique_us, unique_plain, validateUs(bodies[0], 1000),
            unique_dom, describe(v));
    }
    if (run("small")) {  // 2 KB chat request, warm Admitter.
        Admitter admitter(loaded.tokenizer, chat_template);
        const std::string body = padded(conversation(rng, 4, 400) + "]}");
        Verdict v;
        const double us =
            bestUs(2000, [&] { v = admitter.admit(body, body.capacity(), Endpoint::chat_completions, limits); });
        const double dom = bestUs(2000, [&] { (void)nlohmann::json::parse(body).size(); });
        row("2 KB chat request", body.size(), us, plainAdmitUs(loaded.tokenizer, chat_template, body, limits, 2000),
            validateUs(body, 2000), dom, describe(v));
    }
    // `images` base64 images in `total_bytes`.
    const auto imageRow = [&](const char* name, std::size_t total_bytes, int images) {
        std::string body =
            R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":[{"type":"text","text":"What is in these images?"})";
        const std::size_t image_bytes = total_bytes / static_cast<std::size_t>(images) - 64;
        std::string b64(image_bytes, 'A');
        for (std::size_t i = 0; i < b64.size(); i += 7) b64[i] = "QUJDRE+/"[i % 8];
        for (int i = 0; i < images; ++i)
            body += R"(,{"type":"image_url","image_url":{"url":"data:image/png;base64,)" + b64 + "\"}}";
        body += "]}]}";
        body = padded(std::move(body));
        b64.clear();
        b64.shrink_to_fit();
        Admitter admitter(loaded.tokenizer, chat_template);
        const double before = rssMb();
        Verdict v;
        const auto t0 = Clock::now();
        v = admitter.admit(body, body.capacity(), Endpoint::chat_completions, limits);
        const double first_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        const double extra = rssMb() - before;
        const double us =
            std::min(first_us,
                     bestUs(5, [&] { v = admitter.admit(body, body.capacity(), Endpoint::chat_completions, limits); }));
        const double dom = bestUs(1, [&] { (void)nlohmann::json::parse(body).size(); });
        char note[160];
        std::snprintf(note, sizeof note, "; extra RSS %.1f MB (%.1f%% of body)", extra,
                      100.0 * extra / (static_cast<double>(body.size()) / (1 << 20)));
        row(name, body.size(), us, plainAdmitUs(loaded.tokenizer, chat_template, body, limits, 5), validateUs(body, 5),
            dom, describe(v) + note);
    };
    if (run("images")) {
        imageRow("128 MB, 640 images", 128u << 20, 640);
        imageRow("100 MB, 10 images", 100u << 20, 10);
    }
    if (run("agent")) {  // An agent's next turn: 30 KB system prompt, 40 tools (~70 KB), 20 turns.
        std::mt19937 agent_rng(13);
        std::string tools = "[";
        for (int i = 0; i < 40; ++i) {
            if (i > 0) tools += ',';
            tools += R"({"type":"function","function":{"name":"tool_)" + std::to_string(i) + R"(","description":")" +
                     text(agent_rng, 800) +
                     R"(","parameters":{"type":"object","properties":{"arg":{"type":"string","description":")" +
                     text(agent_rng, 800) + R"("}},"required":["arg"]}}})";
        }
        tools += "]";
        std::string body = R"({"model":"ds-v4.1-flash-1017","tools":)" + tools +
                           R"(,"messages":[{"role":"system","content":")" + text(agent_rng, 30000) + "\"}";
        for (int i = 0; i < 20; ++i) {
            body += R"(,{"role":")";
            body += (i % 2 == 0) ? "user" : "assistant";
            body += R"(","content":")" + text(agent_rng, 500) + "\"}";
        }
        body = padded(body + "]}");
        Admitter admitter(loaded.tokenizer, chat_template);
        Verdict v = admitter.admit(body, body.capacity(), Endpoint::chat_completions, limits);  // caches warm
        const double us =
            bestUs(200, [&] { v = admitter.admit(body, body.capacity(), Endpoint::chat_completions, limits); });
        const double dom = bestUs(200, [&] { (void)nlohmann::json::parse(body).size(); });
        row("agent turn (30 KB system, 40 tools), warm", body.size(), us,
            plainAdmitUs(loaded.tokenizer, chat_template, body, limits, 200), validateUs(body, 200), dom, describe(v));
    }
    if (run("conversation")) {  // 1M-token conversation, cold, then its next turn.
        std::mt19937 conv_rng(11);
        std::string body = conversation(conv_rng, 200, 18000);
        std::string next = body;
        next += R"(,{"role":"assistant","content":"Sure."},{"role":"user","content":"And then?"})";
        body = padded(body + "]}");
        next = padded(next + "]}");
        AdmissionLimits wide = limits;
        wide.window_tokens = 1048576;
        Admitter admitter(loaded.tokenizer, chat_template);
        Verdict v;
        const double cold =
            bestUs(1, [&] { v = admitter.admit(body, body.capacity(), Endpoint::chat_completions, wide); });
        const double dom = bestUs(1, [&] { (void)nlohmann::json::parse(body).size(); });
        Admitter plain(loaded.tokenizer, chat_template);
        plain.setFastJsonValidation(false);
        const double plain_cold =
            bestUs(1, [&] { (void)plain.admit(body, body.capacity(), Endpoint::chat_completions, wide); });
        row("1M-token text, cold", body.size(), cold, plain_cold, validateUs(body, 5), dom, describe(v));
        const double warm =
            bestUs(5, [&] { v = admitter.admit(next, next.capacity(), Endpoint::chat_completions, wide); });
        const double dom2 = bestUs(1, [&] { (void)nlohmann::json::parse(next).size(); });
        row("1M-token text, next turn", next.size(), warm, plainAdmitUs(loaded.tokenizer, chat_template, next, wide, 5),
            validateUs(next, 5), dom2, describe(v));
    }
    return 0;
}
