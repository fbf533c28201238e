#include "gateway/metrics/backend_metrics.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>

namespace dpgate::metrics {
namespace {

// The shape vLLM v1 (and dpgate-sim) serve with data parallelism: one series
// per engine, prometheus_client's float formatting, _created companions.
const std::string kVllmV1Page = R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="ds-v4.1-flash-1017"} 2.0
vllm:num_requests_running{engine="1",model_name="ds-v4.1-flash-1017"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="ds-v4.1-flash-1017"} 1.0
vllm:num_requests_waiting{engine="1",model_name="ds-v4.1-flash-1017"} 0.0
# HELP vllm:kv_cache_usage_perc KV-Cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="ds-v4.1-flash-1017"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="ds-v4.1-flash-1017"} 0.0
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="ds-v4.1-flash-1017"} 4000.0
vllm:prefix_cache_queries_total{engine="1",model_name="ds-v4.1-flash-1017"} 0.0
vllm:prefix_cache_queries_created{engine="0",model_name="ds-v4.1-flash-1017"} 1.7646e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="ds-v4.1-flash-1017"} 3000.0
vllm:prefix_cache_hits_total{engine="1",model_name="ds-v4.1-flash-1017"} 0.0
vllm:prefix_cache_hits_created{engine="0",model_name="ds-v4.1-flash-1017"} 1.7646e+09
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="ds-v4.1-flash-1017"} 3.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="ds-v4.1-flash-1017"} 4100.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="ds-v4.1-flash-1017"} 123.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="ds-v4.1-flash-1017"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="ds-v4.1-flash-1017"} 5.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="ds-v4.1-flash-1017"} 0.5
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
process_resident_memory_bytes 1.2e+09
)";

TEST(ParseBackendMetrics, VllmV1PagePerEngine) {
    const BackendRankTable table = parseBackendMetrics(kVllmV1Page);
    EXPECT_EQ(table.parse_errors, 0u);
    ASSERT_EQ(table.rows.size(), 2u);

    const BackendRankRow& r0 = table.rows[0];
    EXPECT_EQ(r0.rank, 0);
    EXPECT_EQ(r0.running, 2.0);
    EXPECT_EQ(r0.waiting, 1.0);
    EXPECT_EQ(r0.kv_cache_usage, 0.25);
    EXPECT_EQ(r0.prefix_cache_queries, 4000.0);
    EXPECT_EQ(r0.prefix_cache_hits, 3000.0);
    EXPECT_EQ(r0.prefix_cache_hit_ratio, 0.75);  // not the _created timestamps
    EXPECT_EQ(r0.preemptions, 3.0);
    EXPECT_EQ(r0.prompt_tokens, 4100.0);
    EXPECT_EQ(r0.generation_tokens, 123.0);

    const BackendRankRow& r1 = table.rows[1];
    EXPECT_EQ(r1.rank, 1);
    EXPECT_EQ(r1.running, 0.0);
    EXPECT_EQ(r1.prefix_cache_queries, 0.0);
    EXPECT_FALSE(r1.prefix_cache_hit_ratio.has_value()) << "no queries yet: no ratio, not 0";
    EXPECT_FALSE(r1.preemptions.has_value());
    EXPECT_EQ(table.samples_used, 13u);
}

TEST(ParseBackendMetrics, RowsAreSortedByRankWhateverThePageOrder) {
    const BackendRankTable table = parseBackendMetrics(
        "vllm:num_requests_running{engine=\"7\"} 1\n"
        "vllm:num_requests_running{engine=\"10\"} 1\n"
        "vllm:num_requests_running{engine=\"2\"} 1\n"
        "vllm:num_requests_waiting{engine=\"7\"} 4\n");
    ASSERT_EQ(table.rows.size(), 3u);
    EXPECT_EQ(table.rows[0].rank, 2);
    EXPECT_EQ(table.rows[1].rank, 7);
    EXPECT_EQ(table.rows[2].rank, 10);
    EXPECT_EQ(table.rows[1].waiting, 4.0);
    ASSERT_NE(table.find(7), nullptr);
    EXPECT_EQ(table.find(7)->waiting, 4.0);
    EXPECT_EQ(table.find(3), nullptr);
}

TEST(ParseBackendMetrics, VllmV0PageWithoutEngineLabelIsRankZeroAndUsesTheHitRateGauge) {
    const BackendRankTable table = parseBackendMetrics(
        "# HELP vllm:num_requests_running Number of requests currently running on GPU.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{model_name=\"/models/llama\"} 3.0\n"
        "vllm:num_requests_swapped{model_name=\"/models/llama\"} 0.0\n"
        "vllm:num_requests_waiting{model_name=\"/models/llama\"} 5.0\n"
        "vllm:gpu_cache_usage_perc{model_name=\"/models/llama\"} 0.5\n"
        "vllm:gpu_prefix_cache_hit_rate{model_name=\"/models/llama\"} 0.42\n");
    EXPECT_EQ(table.parse_errors, 0u);
    ASSERT_EQ(table.rows.size(), 1u);
    EXPECT_EQ(table.rows[0].rank, 0);
    EXPECT_EQ(table.rows[0].running, 3.0);
    EXPECT_EQ(table.rows[0].waiting, 5.0);
    EXPECT_EQ(table.rows[0].kv_cache_usage, 0.5);
    EXPECT_EQ(table.rows[0].prefix_cache_hit_ratio, 0.42);
}

TEST(ParseBackendMetrics, NewestNameWinsOverItsOlderAlias) {
    // A vLLM in the middle of a rename exports both (the old one deprecated).
    const BackendRankTable table = parseBackendMetrics(
        "vllm:gpu_cache_usage_perc{engine=\"0\"} 0.9\n"
        "vllm:kv_cache_usage_perc{engine=\"0\"} 0.3\n"
        "vllm:gpu_prefix_cache_queries_total{engine=\"0\"} 999\n"
        "vllm:prefix_cache_queries_total{engine=\"0\"} 100\n"
        "vllm:prefix_cache_hits_total{engine=\"0\"} 10\n"
        "vllm:gpu_prefix_cache_hits_total{engine=\"0\"} 999\n"
        "vllm:gpu_prefix_cache_hit_rate{engine=\"0\"} 0.99\n");
    ASSERT_EQ(table.rows.size(), 1u);
    EXPECT_EQ(table.rows[0].kv_cache_usage, 0.3);
    EXPECT_EQ(table.rows[0].prefix_cache_queries, 100.0);
    EXPECT_EQ(table.rows[0].prefix_cache_hits, 10.0);
    EXPECT_EQ(table.rows[0].prefix_cache_hit_ratio, 0.1) << "counters beat the v0 gauge";
}

TEST(ParseBackendMetrics, EarlyV1GpuPrefixedCountersAreRead) {
    const BackendRankTable table = parseBackendMetrics(
        "vllm:gpu_prefix_cache_queries_total{engine=\"3\",model_name=\"m\"} 200\n"
        "vllm:gpu_prefix_cache_hits_total{engine=\"3\",model_name=\"m\"} 50\n");
    ASSERT_EQ(table.rows.size(), 1u);
    EXPECT_EQ(table.rows[0].rank, 3);
    EXPECT_EQ(table.rows[0].prefix_cache_hit_ratio, 0.25);
}

TEST(ParseBackendMetrics, SeriesOfOneRankAddUpExceptUsage) {
    const BackendRankTable table = parseBackendMetrics(
        "vllm:num_requests_running{engine=\"0\",model_name=\"a\"} 2\n"
        "vllm:num_requests_running{engine=\"0\",model_name=\"b\"} 3\n"
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"a\"} 0.2\n"
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"b\"} 0.7\n");
    ASSERT_EQ(table.rows.size(), 1u);
    EXPECT_EQ(table.rows[0].running, 5.0);
    EXPECT_EQ(table.rows[0].kv_cache_usage, 0.7);
}

TEST(ParseBackendMetrics, RatioAbsentWhenACounterIsMissingOrInconsistent) {
    auto ratio = [](const std::string& page) { return parseBackendMetrics(page).find(0)->prefix_cache_hit_ratio; };
    EXPECT_FALSE(ratio("vllm:prefix_cache_queries_total{engine=\"0\"} 100\n"));
    EXPECT_FALSE(ratio("vllm:prefix_cache_hits_total{engine=\"0\"} 100\n"));
    EXPECT_FALSE(
        ratio("vllm:prefix_cache_queries_total{engine=\"0\"} 0\nvllm:prefix_cache_hits_total{engine=\"0\"} 0\n"));
    EXPECT_FALSE(
        ratio("vllm:prefix_cache_queries_total{engine=\"0\"} 10\nvllm:prefix_cache_hits_total{engine=\"0\"} 11\n"));
    // The v0 gauge is a fallback only when the counters are absent, and must be a ratio.
    EXPECT_FALSE(ratio("vllm:prefix_cache_queries_total{engine=\"0\"} 0\nvllm:gpu_prefix_cache_hit_rate 0.5\n"));
    EXPECT_FALSE(ratio("vllm:gpu_prefix_cache_hit_rate{engine=\"0\"} 1.5\n"));
    EXPECT_EQ(ratio("vllm:prefix_cache_queries_total{engine=\"0\"} 8\nvllm:prefix_cache_hits_total{engine=\"0\"} 8\n"),
              1.0);
}

TEST(ParseBackendMetrics, CountersWithoutTotalSuffixAreRead) {
    const BackendRankTable table = parseBackendMetrics(
        "vllm:prefix_cache_queries{engine=\"1\"} 10\n"
        "vllm:prefix_cache_hits{engine=\"1\"} 4\n"
        "vllm:num_preemptions{engine=\"1\"} 2\n");
    ASSERT_NE(table.find(1), nullptr);
    EXPECT_EQ(table.find(1)->prefix_cache_hit_ratio, 0.4);
    EXPECT_EQ(table.find(1)->preemptions, 2.0);
}

TEST(ParseBackendMetrics, SpecialValuesTimestampsAndNumberFormats) {
    const BackendRankTable table = parseBackendMetrics(
        "vllm:num_requests_running{engine=\"0\"} NaN\n"
        "vllm:num_requests_waiting{engine=\"0\"} +Inf\n"
        "vllm:kv_cache_usage_perc{engine=\"0\"} -Inf\n"
        "vllm:num_requests_running{engine=\"1\"} 1e1 1700000000000\n"
        "vllm:num_requests_waiting{engine=\"1\"} +3 -5\n"
        "vllm:kv_cache_usage_perc{engine=\"1\"} 5E-1\n"
        "vllm:prompt_tokens_total{engine=\"1\"} -0.0\n"
        "vllm:generation_tokens_total{engine=\"1\"} -1\n");
    EXPECT_EQ(table.parse_errors, 0u);
    ASSERT_EQ(table.rows.size(), 2u);
    // Rank 0 is listed (it has samples) but holds nothing usable.
    EXPECT_EQ(table.rows[0], BackendRankRow{});
    EXPECT_EQ(table.rows[1].running, 10.0);
    EXPECT_EQ(table.rows[1].waiting, 3.0);
    EXPECT_EQ(table.rows[1].kv_cache_usage, 0.5);
    EXPECT_EQ(table.rows[1].prompt_tokens, 0.0);
    EXPECT_FALSE(table.rows[1].generation_tokens.has_value()) << "a negative count is not a count";
}

TEST(ParseBackendMetrics, SumsThatOverflowAreDroppedNotInfinite) {
    const BackendRankTable table = parseBackendMetrics(
        "vllm:prompt_tokens_total{engine=\"0\",model_name=\"a\"} 1.7e308\n"
        "vllm:prompt_tokens_total{engine=\"0\",model_name=\"b\"} 1.7e308\n");
    ASSERT_EQ(table.rows.size(), 1u);
    EXPECT_FALSE(table.rows[0].prompt_tokens.has_value());
}

TEST(ParseBackendMetrics, EscapedLabelValuesCrlfBlanksAndWhitespace) {
    const BackendRankTable table = parseBackendMetrics(
        "# HELP vllm:num_requests_running Running.\r\n"
        "\r\n"
        "vllm:num_requests_running{model_name=\"a \\\"quoted\\\" {name}, with\\\\ and \\n\",engine=\"4\"} 6.0\r\n"
        "   \t\r\n"
        "  vllm:num_requests_waiting { engine = \"4\" , model_name=\"x\", } \t 2 \r\n"
        "vllm:generation_tokens_total{engine=\"4\"}\t7");  // no final newline
    EXPECT_EQ(table.parse_errors, 0u);
    ASSERT_EQ(table.rows.size(), 1u);
    EXPECT_EQ(table.rows[0].rank, 4);
    EXPECT_EQ(table.rows[0].running, 6.0);
    EXPECT_EQ(table.rows[0].waiting, 2.0);
    EXPECT_EQ(table.rows[0].generation_tokens, 7.0);
}

TEST(ParseBackendMetrics, GarbageLinesAreCountedAndSkipped) {
    const std::string page =
        "vllm:num_requests_running{engine=\"0\"} 1\n"
        "this is not a metric\n"                                    // value is not a number
        "vllm:num_requests_running{engine=\"1\" 1\n"                // unclosed label set
        "vllm:num_requests_running{engine=\"1} 1\n"                 // unclosed quote
        "vllm:num_requests_running{engine=\"1\",engine=\"2\"} 1\n"  // label given twice
        "vllm:num_requests_running{engine=\"1\\x\"} 1\n"            // undefined escape
        "vllm:num_requests_running{1engine=\"1\"} 1\n"              // bad label name
        "vllm:num_requests_running{engine=\"1\"}\n"                 // no value
        "vllm:num_requests_running{engine=\"1\"} 1 2 3\n"           // trailing junk
        "vllm:num_requests_running{engine=\"1\"} 1 1.5\n"           // timestamp not an integer
        "vllm:num_requests_running{engine=\"1\"} 0x10\n"            // not Go float syntax
        "vllm:num_requests_running{engine=\"1\"} ++1\n"
        "vllm:num_requests_running{engine=\"1\"} 1e999\n"  // out of range
        "{engine=\"1\"} 1\n"                               // no name
        "vllm:num_requests_running{engine=\"-1\"} 1\n"     // not a rank
        "vllm:num_requests_running{engine=\"1024\"} 1\n"   // above kMaxBackendRank
        "vllm:num_requests_running{engine=\"a\\\\\"} 1\n"  // not a rank
        "vllm:num_requests_running{engine=\"\"} 1\n"       // not a rank
        "\x01\xff\xfe binary\n"
        "vllm:num_requests_waiting{engine=\"0\"} 2\n";
    const BackendRankTable table = parseBackendMetrics(page);
    EXPECT_EQ(table.parse_errors, 18u);
    ASSERT_EQ(table.rows.size(), 1u);
    EXPECT_EQ(table.rows[0].rank, 0);
    EXPECT_EQ(table.rows[0].running, 1.0);
    EXPECT_EQ(table.rows[0].waiting, 2.0);
    EXPECT_EQ(table.samples_used, 2u);
}

TEST(ParseBackendMetrics, UnknownMetricsWithOddButValidRanksAreNotErrors) {
    // An engine label we cannot use only matters on a metric we read.
    const BackendRankTable table = parseBackendMetrics("other_metric{engine=\"not-a-rank\"} 1\n");
    EXPECT_EQ(table.parse_errors, 0u);
    EXPECT_TRUE(table.rows.empty());
}

TEST(ParseBackendMetrics, EmptyAndCommentOnlyPages) {
    EXPECT_EQ(parseBackendMetrics(""), BackendRankTable{});
    EXPECT_EQ(parseBackendMetrics("\n\n# just a comment\n#\n"), BackendRankTable{});
}

TEST(ParseBackendMetrics, HugePageIsLinear) {
    // 8 ranks x 5 metrics, repeated into a ~50 MB page with garbage lines and
    // one enormous line: a quadratic parser would take minutes.
    std::string block;
    for (int rank = 0; rank < 8; ++rank) {
        const std::string labels = "{engine=\"" + std::to_string(rank) + "\",model_name=\"ds-v4.1-flash-1017\"}";
        block += "vllm:num_requests_running" + labels + " 1.0\n";
        block += "vllm:prefix_cache_queries_total" + labels + " 10.0\n";
        block += "vllm:prefix_cache_hits_total" + labels + " 5.0\n";
        block += "garbage line\n";
    }
    std::string page;
    const int repeats = 50'000'000 / static_cast<int>(block.size());
    page.reserve(static_cast<size_t>(repeats) * block.size() + 8'000'100);
    for (int i = 0; i < repeats; ++i) page += block;
    page += "vllm:num_requests_running{model_name=\"" + std::string(8'000'000, 'x');  // never closed

    const auto start = std::chrono::steady_clock::now();
    const BackendRankTable table = parseBackendMetrics(page);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    ASSERT_EQ(table.rows.size(), 8u);
    EXPECT_EQ(table.rows[3].running, static_cast<double>(repeats));
    EXPECT_EQ(table.rows[3].prefix_cache_hit_ratio, 0.5);
    EXPECT_EQ(table.parse_errors, static_cast<size_t>(repeats) * 8 + 1);
    // Generous for a loaded 2-core machine under sanitizers; linear runs in well under 1 s.
    EXPECT_LT(elapsed, std::chrono::seconds(20));
}

TEST(BackendRankTableJson, NullsForAbsentFields) {
    const auto json = backendRankTableJson(parseBackendMetrics(kVllmV1Page + "junk\n"));
    EXPECT_EQ(json["parse_errors"], 1);
    ASSERT_EQ(json["ranks"].size(), 2u);
    EXPECT_EQ(json["ranks"][0]["rank"], 0);
    EXPECT_EQ(json["ranks"][0]["running"], 2.0);
    EXPECT_EQ(json["ranks"][0]["prefix_cache_hit_ratio"], 0.75);
    EXPECT_TRUE(json["ranks"][1]["prefix_cache_hit_ratio"].is_null());
    EXPECT_TRUE(json["ranks"][1]["preemptions"].is_null());
}

}  // namespace
}  // namespace dpgate::metrics
