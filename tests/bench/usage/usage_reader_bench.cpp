// The usage reader (gateway/usage/stream_usage) beside a peer of another
// design (legacy_usage_reader: a hand JSON grammar for answers, nlohmann for
// SSE events), timed in the same run on the inputs the relay hands it: a
// non-stream answer of ~1 KB and of 64 KB, read from its end
// (parseUsageJson) and whole by simdjson On Demand (readWholeUsage); the
// data of one usage-only SSE event (isUsageOnlyChunk, parseUsageJson); and a
// whole include_usage stream of 500 token chunks fed event by event through
// SseUsageParser::filter, as the relay's reads deliver it.
//
// Median of `rounds` rounds (the two taken in turn), ns per call; the ratio is legacy / dpgate
// (above 1: dpgate is faster). docs/BENCHMARKS.md, "Usage reader".
//
//   build/bin/dpgate-bench-usage [rounds]
#include "gateway/usage/stream_usage.hpp"
#include "legacy_usage_reader.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using dpgate::gateway::Usage;
using dpgate::gateway::UsageCheck;

const std::string kUsageObject = R"("usage":{"prompt_tokens":1843,"total_tokens":2260,"completion_tokens":417,)"
                                 R"("prompt_tokens_details":{"cached_tokens":1536}})";

// A vLLM chat answer whose message text makes it `content_bytes` long or so.
std::string answer(size_t content_bytes) {
    std::string content;
    const std::string sentence = "The gateway relays tokens from a DP rank, and counts them \\\"exactly\\\".\\n";
    while (content.size() < content_bytes) content += sentence;
    return R"({"id":"chatcmpl-8d2f0c6e4b1a4f7e9c3d","object":"chat.completion","created":1733230000,)"
           R"("model":"ds-v4.1-flash-1017","choices":[{"index":0,"message":{"role":"assistant","content":")" +
           content + R"(","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],)" +
           kUsageObject + R"(,"prompt_logprobs":null})";
}

const std::string kUsageChunkData =
    R"({"id":"chatcmpl-8d2f0c6e4b1a4f7e9c3d","object":"chat.completion.chunk","created":1733230000,)"
    R"("model":"ds-v4.1-flash-1017","choices":[],)" +
    kUsageObject + "}";

// The events of an include_usage stream: role, `tokens` content chunks, the
// finish chunk, the usage-only chunk, [DONE].
std::vector<std::string> streamEvents(int tokens) {
    const std::string head =
        R"(data: {"id":"chatcmpl-8d2f0c6e4b1a4f7e9c3d","object":"chat.completion.chunk","created":1733230000,)"
        R"("model":"ds-v4.1-flash-1017","choices":[{"index":0,"delta":)";
    const char* words[] = {"the", " gateway", " relays", " tokens", " from", " a", " rank", "."};
    std::vector<std::string> events;
    events.push_back(head + R"({"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})" + "\n\n");
    for (int i = 0; i < tokens; ++i) {
        events.push_back(head + R"({"content":")" + words[i % 8] + R"("},"logprobs":null,"finish_reason":null}]})" +
                         "\n\n");
    }
    events.push_back(head + R"({"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]})" + "\n\n");
    events.push_back("data: " + kUsageChunkData + "\n\n");
    events.push_back("data: [DONE]\n\n");
    return events;
}

// Calls per round for `body`: enough (about 20 ms) to dwarf the clock.
template <typename Body>
size_t callsPerRound(Body& body) {
    size_t calls = 1;
    for (;;) {
        const auto t0 = Clock::now();
        for (size_t i = 0; i < calls; ++i) body();
        if (Clock::now() - t0 > std::chrono::milliseconds(20)) return calls;
        calls *= 2;
    }
}

template <typename Body>
double roundNs(Body& body, size_t calls) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < calls; ++i) body();
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(calls);
}

double median(std::vector<double> ns) {
    std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
    return ns[ns.size() / 2];
}

volatile uint64_t g_sink = 0;

// One line: the median ns per call of each over `rounds` rounds, the two
// taken in turn so a busy neighbour on a shared machine slows both alike.
template <typename Legacy, typename Simdjson>
void row(const char* name, int rounds, Legacy legacy, Simdjson simdjson) {
    const size_t legacy_calls = callsPerRound(legacy);
    const size_t simdjson_calls = callsPerRound(simdjson);
    std::vector<double> legacy_ns, simdjson_ns;
    for (int r = 0; r < rounds; ++r) {
        legacy_ns.push_back(roundNs(legacy, legacy_calls));
        simdjson_ns.push_back(roundNs(simdjson, simdjson_calls));
    }
    const double l = median(legacy_ns), n = median(simdjson_ns);
    std::printf("%-46s %12.0f %12.0f %8.2fx\n", name, l, n, l / n);
}

void consume(const std::optional<Usage>& usage) { g_sink = g_sink + (usage ? usage->prompt_tokens : 1); }

template <typename Parser>
std::string filterStream(const std::vector<std::string>& events, std::optional<Usage>& usage) {
    Parser parser;
    std::string forward;
    for (const std::string& event : events) parser.filter(event, forward);
    parser.finish(&forward);
    usage = parser.usage();
    return forward;
}

}  // namespace

int main(int argc, char** argv) {
    namespace now = dpgate::gateway;
    namespace legacy = dpgate::bench::legacy;
    const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;
    const std::string small = answer(600);
    const std::string large = answer(64 << 10);
    const std::vector<std::string> events = streamEvents(500);
    const std::string usage_event = "data: " + kUsageChunkData + "\n\n";
    size_t stream_bytes = 0;
    for (const std::string& event : events) stream_bytes += event.size();

    // Both read the same facts before either is timed.
    std::optional<Usage> legacy_usage, new_usage;
    const std::string legacy_forward = filterStream<legacy::SseUsageParser>(events, legacy_usage);
    const std::string new_forward = filterStream<now::SseUsageParser>(events, new_usage);
    for (const std::string* text : {&small, &large, &kUsageChunkData}) {
        if (legacy::parseUsageJson(*text) != now::parseUsageJson(*text) || !now::parseUsageJson(*text) ||
            now::readWholeUsage(*text) != now::parseUsageJson(*text)) {
            std::fprintf(stderr, "the readers disagree on a %zu-byte answer\n", text->size());
            return 1;
        }
    }
    if (!now::isUsageOnlyChunk(kUsageChunkData) || !legacy::isUsageOnlyChunk(kUsageChunkData) || !new_usage ||
        new_usage != legacy_usage || new_forward != legacy_forward) {
        std::fprintf(stderr, "the readers disagree on the stream\n");
        return 1;
    }

    std::printf("median of %d rounds, ns per call; ratio = legacy / dpgate (above 1: dpgate faster)\n", rounds);
    std::printf("%-46s %12s %12s %9s\n", "", "legacy", "dpgate", "ratio");
    char name[96];
    // Each answer read from its end (parseUsageJson), then whole, the read
    // parseUsageJson falls back to.
    using Read = std::optional<Usage> (*)(std::string_view, const UsageCheck&) noexcept;
    for (auto [reader, read] : {std::pair<const char*, Read>{"parseUsageJson", now::parseUsageJson},
                                std::pair<const char*, Read>{"readWholeUsage", now::readWholeUsage}}) {
        for (const std::string* text : {&small, &large}) {
            std::snprintf(name, sizeof name, "%s, answer of %zu B", reader, text->size());
            row(
                name, rounds, [&] { consume(legacy::parseUsageJson(*text)); },
                [&] { consume(read(*text, UsageCheck{})); });
        }
    }
    std::snprintf(name, sizeof name, "parseUsageJson, usage chunk data (%zu B)", kUsageChunkData.size());
    row(
        name, rounds, [&] { consume(legacy::parseUsageJson(kUsageChunkData)); },
        [&] { consume(now::parseUsageJson(kUsageChunkData)); });
    std::snprintf(name, sizeof name, "isUsageOnlyChunk, usage chunk data (%zu B)", kUsageChunkData.size());
    row(
        name, rounds, [&] { g_sink = g_sink + legacy::isUsageOnlyChunk(kUsageChunkData); },
        [&] { g_sink = g_sink + now::isUsageOnlyChunk(kUsageChunkData); });
    std::string forward;
    auto filterEvent = [&]<typename Parser>(Parser&& parser) {
        forward.clear();
        parser.filter(usage_event, forward);
        consume(parser.usage());
    };
    row(
        "filter, the usage-only event alone", rounds, [&] { filterEvent(legacy::SseUsageParser()); },
        [&] { filterEvent(now::SseUsageParser()); });
    std::snprintf(name, sizeof name, "filter, stream of 500 tokens (%zu B)", stream_bytes);
    std::optional<Usage> usage;
    row(
        name, rounds, [&] { g_sink = g_sink + filterStream<legacy::SseUsageParser>(events, usage).size(); },
        [&] { g_sink = g_sink + filterStream<now::SseUsageParser>(events, usage).size(); });
    return g_sink == 0 ? 1 : 0;
}
