// dpgate-metrics-names: one family name per line (default), or the rendered
// page with a sample child in every labelled family (--render), so tools can
// check what dpgate exports without running the gateway.
#include "gateway/metrics/gateway_metrics.hpp"

#include <cstdio>
#include <cstring>
#include <iostream>

int main(int argc, char** argv) {
    dpgate::metrics::GatewayMetrics m;
    if (argc > 1 && std::strcmp(argv[1], "--render") == 0) {
        m.requests.with({"/v1/chat/completions", "200"}).inc(3);
        m.request_duration_seconds.observe(1.5);
        m.time_to_first_byte_seconds.observe(0.2);
        m.admission_rejections.with({"context_length_exceeded"}).inc();
        m.admission_seconds.observe(0.0004);
        m.prompt_tokens.with({"primary", "0"}).inc(1000);
        m.cached_prompt_tokens.with({"primary", "0"}).inc(800);
        m.completion_tokens.with({"primary", "0"}).inc(50);
        m.inflight_requests.with({"primary", "0"}).set(1);
        m.backend_up.with({"primary", "primary"}).set(1);
        m.stream_aborts.with({"client"}).inc();
        m.count_checks.with({"primary"}).inc(40);
        m.count_mismatches.with({"primary"}).inc(0);
        m.backend_usage_invalid.with({"primary"}).inc(0);
        m.upstream_dropped.with({"primary", "bytes_while_idle"}).inc(0);
        m.public_window_tokens.set(1048576);
        std::cout << m.render();
        return 0;
    }
    if (argc > 1) {
        std::fprintf(stderr, "usage: %s [--render]\n", argv[0]);
        return 2;
    }
    for (const auto& name : m.registry.familyNames()) std::cout << name << '\n';
    return 0;
}
