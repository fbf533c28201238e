#include "gateway/metrics/gateway_metrics.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace dpgate::metrics {
namespace {

TEST(GatewayMetrics, DeclaresExactlyTheIssueFamilies) {
    GatewayMetrics m;
    const std::vector<std::string> families = {"dpgate_requests_total",
                                               "dpgate_request_duration_seconds",
                                               "dpgate_time_to_first_byte_seconds",
                                               "dpgate_admission_rejections_total",
                                               "dpgate_admission_seconds",
                                               "dpgate_prompt_tokens_total",
                                               "dpgate_cached_prompt_tokens_total",
                                               "dpgate_completion_tokens_total",
                                               "dpgate_inflight_requests",
                                               "dpgate_backend_up",
                                               "dpgate_upstream_retries_total",
                                               "dpgate_internal_errors_total",
                                               "dpgate_flips_total",
                                               "dpgate_forced_flips_total",
                                               "dpgate_unaccepted_failover",
                                               "dpgate_public_window_tokens",
                                               "dpgate_admission_queued",
                                               "dpgate_admission_deferred_total",
                                               "dpgate_stream_aborts_total",
                                               "dpgate_count_checks_total",
                                               "dpgate_count_mismatches_total",
                                               "dpgate_open_connections",
                                               "dpgate_buffered_body_bytes",
                                               "dpgate_connections_refused_total",
                                               "dpgate_idle_connections_evicted_total",
                                               "dpgate_backend_usage_invalid_total",
                                               "dpgate_upstream_connections_dropped_total",
                                               "dpgate_control_store_up",
                                               "dpgate_control_revision",
                                               "dpgate_control_resyncs_total",
                                               "dpgate_key_tokens_total",
                                               "dpgate_key_requests_total",
                                               "dpgate_key_rate_limited_total",
                                               "dpgate_budget_store_up",
                                               "dpgate_budget_local_decisions_total"};
    EXPECT_EQ(m.registry.familyNames(), families);
}

TEST(GatewayMetrics, PerRankTokensLandOnTheirSeries) {
    GatewayMetrics m;
    m.prompt_tokens.with({"primary", "3"}).inc(1000);
    m.cached_prompt_tokens.with({"primary", "3"}).inc(750);
    m.completion_tokens.with({"standby", "0"}).inc(9);
    const std::string page = m.render();
    EXPECT_NE(page.find("dpgate_prompt_tokens_total{backend=\"primary\",rank=\"3\"} 1000\n"), std::string::npos);
    EXPECT_NE(page.find("dpgate_cached_prompt_tokens_total{backend=\"primary\",rank=\"3\"} 750\n"), std::string::npos);
    EXPECT_NE(page.find("dpgate_completion_tokens_total{backend=\"standby\",rank=\"0\"} 9\n"), std::string::npos);
    EXPECT_NE(page.find("dpgate_flips_total 0\n"), std::string::npos);
}

TEST(GatewayMetrics, TimeToFirstByteBucketsReachHalfAnHour) {
    EXPECT_GE(GatewayMetrics::timeToFirstByteBuckets().back(), 1800);
    GatewayMetrics m;
    m.time_to_first_byte_seconds.observe(25 * 60);  // a 1M-token prefill behind another
    const auto s = m.time_to_first_byte_seconds.snapshot();
    EXPECT_EQ(s.cumulative[s.cumulative.size() - 2], 1u);  // inside the last finite bucket
}

std::string runCommand(const std::string& cmd, int& status) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) {
        status = -1;
        return out;
    }
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    status = pclose(p);
    return out;
}

// The page every family with a sample child, exactly as the CLI renders it,
// must pass promtool's linter (names, HELP, TYPE, histogram shape, units).
TEST(GatewayMetrics, PromtoolAcceptsTheRenderedPage) {
    if (!std::filesystem::exists("/usr/bin/promtool")) GTEST_SKIP() << "/usr/bin/promtool absent";
    const auto path = std::filesystem::temp_directory_path() / ("dpgate_metrics_" + std::to_string(getpid()) + ".txt");
    int status = 0;
    const std::string page = runCommand(std::string(DPGATE_METRICS_NAMES_BIN) + " --render", status);
    ASSERT_EQ(status, 0);
    for (const char* family : {"dpgate_requests_total{", "dpgate_inflight_requests{", "dpgate_backend_up{",
                               "dpgate_stream_aborts_total{", "dpgate_admission_seconds_bucket{"})
        EXPECT_NE(page.find(family), std::string::npos) << family;
    std::ofstream(path) << page;
    const std::string lint = runCommand("/usr/bin/promtool check metrics < " + path.string() + " 2>&1", status);
    std::filesystem::remove(path);
    EXPECT_EQ(status, 0) << lint;
    EXPECT_EQ(lint, "") << lint;
}

TEST(GatewayMetrics, PromtoolRejectsABrokenPage) {
    // Guards the test above: promtool must actually be linting what we give it.
    if (!std::filesystem::exists("/usr/bin/promtool")) GTEST_SKIP() << "/usr/bin/promtool absent";
    int status = 0;
    const std::string lint =
        runCommand("printf '# TYPE x counter\\nx{a=\"1\" 1\\n' | /usr/bin/promtool check metrics 2>&1", status);
    EXPECT_NE(status, 0) << lint;
}

}  // namespace
}  // namespace dpgate::metrics
