// What metrics cost one request, in nanoseconds: the updates the request path
// (gateway/path/: body_pump.cpp, accounting.cpp) makes per admitted, answered request (requests{endpoint,code}, the
// three histograms, in-flight inc/dec, the three per-slot token counters, each through Family::with() as the relay
// calls it), timed in a loop on one thread and on two threads hitting the same children (a 2-worker gateway). Beside
// it, the peer the relay runs per request whether metrics are on or off: parseUsageJson() of a small non-stream answer.
//
// bench_metrics.py measures a whole request's gateway CPU (about 60-80 us
// for the small chat body on this machine); dividing gives the share that
// metrics can take, without wrk's run-to-run noise on a shared machine.
//
//   build/bin/dpgate-bench-metrics [iterations_per_thread]
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/usage/stream_usage.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using dpgate::metrics::GatewayMetrics;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kAnswer =
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"model\":\"ds-v4.1-flash-1017\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"Hello, gateway benchmark!\"},\"finish_reason\":\"stop\"}],"
    "\"usage\":{\"prompt_tokens\":31,\"completion_tokens\":16,\"total_tokens\":47,"
    "\"prompt_tokens_details\":{\"cached_tokens\":16}}}";

// Mirrors the request path's calls (gateway/path/body_pump.cpp: pumpAnswer();
// accounting.cpp: accountAnswer(), ~RequestOutcome()). Keep in step with them
// when they change what they record.
void recordOneRequest(GatewayMetrics& m, unsigned i) {
    const std::string backend_name = "primary";
    const std::string rank_label = std::to_string(i % 8);
    m.admission_seconds.observe(20e-6);
    auto& inflight = m.inflight_requests.with({backend_name, rank_label});
    inflight.inc();
    m.time_to_first_byte_seconds.observe(0.004);
    m.prompt_tokens.with({backend_name, rank_label}).inc(31);
    m.cached_prompt_tokens.with({backend_name, rank_label}).inc(16);
    m.completion_tokens.with({backend_name, rank_label}).inc(16);
    inflight.dec();
    m.requests.with({"/v1/chat/completions", std::to_string(200)}).inc();
    m.request_duration_seconds.observe(0.005);
}

// Best (least disturbed) of `runs` timings, in ns per iteration per thread.
template <typename Body>
double bestNs(int threads, unsigned iterations, int runs, Body body) {
    double best = 1e300;
    for (int r = 0; r < runs; ++r) {
        std::vector<std::thread> pool;
        const auto t0 = Clock::now();
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                for (unsigned i = 0; i < iterations; ++i) body(i + static_cast<unsigned>(t));
            });
        }
        for (auto& th : pool) th.join();
        const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
        best = std::min(best, ns / iterations);
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    const unsigned iterations = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 200'000;
    GatewayMetrics metrics;
    volatile uint64_t sink = 0;
    auto record = [&](unsigned i) { recordOneRequest(metrics, i); };
    auto parse = [&](unsigned) { sink = sink + dpgate::gateway::parseUsageJson(kAnswer)->prompt_tokens; };

    std::printf("per request, best of 7 runs of %u iterations per thread (wall ns per iteration per thread)\n",
                iterations);
    std::printf("%-44s %10s %10s\n", "", "1 thread", "2 threads");
    std::printf("%-44s %10.0f %10.0f\n", "metric updates of one request (metrics on)", bestNs(1, iterations, 7, record),
                bestNs(2, iterations, 7, record));
    std::printf("%-44s %10.0f %10.0f\n", "peer: parseUsageJson of the answer (always)", bestNs(1, iterations, 7, parse),
                bestNs(2, iterations, 7, parse));
    // The loop's own effect on the page: every update landed.
    const std::string page = metrics.render();
    std::printf("rendered page: %zu bytes\n", page.size());
    return sink == 0 ? 1 : 0;
}
