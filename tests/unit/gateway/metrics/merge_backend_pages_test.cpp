#include "gateway/metrics/merge_backend_pages.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dpgate::metrics {
namespace {

MergedPages merge(const std::vector<BackendPage>& pages, const MergeLimits& limits = {}) {
    return mergeBackendPages(pages, limits);
}

// The families' part of a merged page: without dpgate's up gauge.
std::string families(const MergedPages& merged) {
    return merged.text.substr(0, merged.text.find("# HELP dpgate_backend_metrics_up"));
}

// One vLLM-shaped page: a gauge, a counter with its _created companion, and
// a histogram whose series interleave by engine.
const std::string kPage = R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 0.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 10.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 1.5
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 2.0
)";

TEST(MergeBackendPages, LabelsEverySampleWithItsBackendFirst) {
    const MergedPages merged = merge({{"a", "x 1\ny{k=\"v\"} 2 1700000000000\nz{} 3\n"}});
    EXPECT_EQ(families(merged), "x{backend=\"a\"} 1\ny{backend=\"a\",k=\"v\"} 2 1700000000000\nz{backend=\"a\"} 3\n");
    ASSERT_EQ(merged.pages.size(), 1u);
    EXPECT_EQ(merged.pages[0].samples, 3u);
    EXPECT_EQ(merged.pages[0].skipped, 0u);
}

TEST(MergeBackendPages, MergesFamiliesSoEachIsDeclaredOnceAndContiguous) {
    const MergedPages merged = merge({{"a", kPage}, {"b", kPage}});
    const std::string text = families(merged);
    for (const char* declared :
         {"# TYPE vllm:num_requests_running gauge", "# TYPE vllm:prompt_tokens_total counter",
          "# HELP vllm:e2e_request_latency_seconds Histogram", "# TYPE vllm:e2e_request_latency_seconds histogram"}) {
        const size_t at = text.find(declared);
        ASSERT_NE(at, std::string::npos) << declared;
        EXPECT_EQ(text.find(declared, at + 1), std::string::npos) << declared;
    }
    // a's samples of a family, then b's, then the next family.
    EXPECT_NE(text.find("vllm:num_requests_running{backend=\"a\",engine=\"1\",model_name=\"m\"} 0.0\n"
                        "vllm:num_requests_running{backend=\"b\",engine=\"0\",model_name=\"m\"} 2.0\n"
                        "vllm:num_requests_running{backend=\"b\",engine=\"1\",model_name=\"m\"} 0.0\n"
                        "# HELP vllm:prompt_tokens_total"),
              std::string::npos)
        << text;
    // A histogram's _bucket, _sum and _count stay in its family.
    EXPECT_NE(text.find("vllm:e2e_request_latency_seconds_count{backend=\"a\",engine=\"0\",model_name=\"m\"} 2.0\n"
                        "vllm:e2e_request_latency_seconds_sum{backend=\"b\""),
              std::string::npos)
        << text;
    EXPECT_EQ(merged.pages[0].samples, 8u);
    EXPECT_EQ(merged.pages[1].samples, 8u);
    EXPECT_EQ(merged.pages[1].skipped, 0u);
}

TEST(MergeBackendPages, ReportsEachBackendUpOrDown) {
    const MergedPages merged = merge({{"a", "x 1\n"}, {"b", std::nullopt}, {"c", ""}});
    EXPECT_EQ(merged.text,
              "x{backend=\"a\"} 1\n"
              "# HELP dpgate_backend_metrics_up Whether this answer holds the backend's own /metrics series (1) or "
              "they could not be fetched (0).\n"
              "# TYPE dpgate_backend_metrics_up gauge\n"
              "dpgate_backend_metrics_up{backend=\"a\"} 1\n"
              "dpgate_backend_metrics_up{backend=\"b\"} 0\n"
              "dpgate_backend_metrics_up{backend=\"c\"} 1\n");
    EXPECT_EQ(merge({}).text, "");
}

TEST(MergeBackendPages, TakesCrlfAMissingLastNewlineAndBlanks) {
    const std::string lf = families(merge({{"a", "# TYPE x gauge\nx{k=\"v\"} 1\n\n  y 2\n"}}));
    EXPECT_EQ(families(merge({{"a", "# TYPE x gauge\r\nx{k=\"v\"} 1\r\n\r\n  y 2\r\n"}})), lf);
    EXPECT_EQ(families(merge({{"a", "# TYPE x gauge\nx{k=\"v\"} 1\n\n\ty 2"}})), lf);
    EXPECT_EQ(lf, "# TYPE x gauge\nx{backend=\"a\",k=\"v\"} 1\ny{backend=\"a\"} 2\n");
}

TEST(MergeBackendPages, KeepsLabelValuesAsWritten) {
    const std::string page = R"(x{path="a\"b{c}",n="line\nnext",s="back\\slash",u="é"} 1
x { a = "1" , b="2", } 2
)";
    const MergedPages merged = merge({{"a", page}});
    EXPECT_EQ(families(merged), R"(x{backend="a",path="a\"b{c}",n="line\nnext",s="back\\slash",u="é"} 1
x{backend="a",a="1",b="2"} 2
)");
    EXPECT_EQ(merged.pages[0].skipped, 0u);
}

TEST(MergeBackendPages, SkipsAndCountsWhatItCannotVouchFor) {
    const std::vector<std::string> bad = {
        "x{a=\"b\\q\"} 1",        // an escape the format does not have
        "x{a=\"unterminated} 1",  // no closing quote
        "x{a=\"\xff\"} 1",        // not UTF-8
        "x{a=\"1\",a=\"2\"} 1",   // a label twice
        "x{__name__=\"y\"} 1",    // reserved
        "x{1a=\"b\"} 1",          // a label name may not start with a digit
        "x 0x1p3",                // Go reads hex floats, from_chars does not: refused, not guessed
        "x nan(1)",
        "x -NaN",
        "x 1e999",  // out of range
        "x 1 +5",   // a timestamp takes no sign
        "x 1 99999999999999999999",
        "x 1 2 3",
        "x",
        "x{a=\"b\"}",
        "x-1 2",
        "{a=\"b\"} 1",
        "}garbage{",
        "# HELP h bad \\escape",
        "# TYPE t nonsense",
        "# TYPE t gauge extra",
    };
    for (const std::string& line : bad) {
        const MergedPages merged = merge({{"a", line + "\nok 1\n"}});
        EXPECT_EQ(merged.pages[0].skipped, 1u) << line;
        EXPECT_EQ(merged.pages[0].samples, 1u) << line;
        EXPECT_EQ(families(merged), "ok{backend=\"a\"} 1\n") << line;
    }
    // Values Go and Prometheus read alike.
    for (const char* value : {"1", "-1.5e-3", "+Inf", "-Inf", "NaN", "Inf", ".5", "7."}) {
        EXPECT_EQ(merge({{"a", std::string("x ") + value + "\n"}}).pages[0].samples, 1u) << value;
    }
}

TEST(MergeBackendPages, DropsPlainCommentsAndKeepsTheFirstHelpAndType) {
    const MergedPages merged = merge({{"a",
                                       "# a comment\n# HELP x first\n# HELP x second\n# TYPE x gauge\n"
                                       "# TYPE x counter\nx 1\n# EOF\n"},
                                      {"b", "# HELP x other words\n# TYPE x gauge\nx 2\n"}});
    EXPECT_EQ(families(merged), "# HELP x first\n# TYPE x gauge\nx{backend=\"a\"} 1\nx{backend=\"b\"} 2\n");
    EXPECT_EQ(merged.pages[0].skipped, 1u);  // the second TYPE
    EXPECT_EQ(merged.pages[1].skipped, 0u);
}

TEST(MergeBackendPages, APageThatTypesAFamilyOtherwiseLosesItsSamplesOfIt) {
    const MergedPages merged = merge({{"a", "# TYPE x gauge\nx 1\n"},
                                      {"b", "# TYPE x counter\nx 2\ny 3\n"},
                                      {"c", "x 4\n"}});  // no TYPE: takes the decided one
    EXPECT_EQ(families(merged), "# TYPE x gauge\nx{backend=\"a\"} 1\nx{backend=\"c\"} 4\ny{backend=\"b\"} 3\n");
    EXPECT_EQ(merged.pages[1].skipped, 2u);  // its TYPE and its sample
}

TEST(MergeBackendPages, HistogramsAndSummariesKeepTheirParts) {
    const std::string page =
        "# TYPE h histogram\n"
        "h_bucket{le=\"0.5\"} 1\n"
        "h_bucket{le=\"+Inf\"} 2\n"
        "h_sum 3\n"
        "h_count 2\n"
        "h 9\n"                  // a histogram has no bare sample
        "h_bucket{x=\"1\"} 1\n"  // a bucket needs le
        "# TYPE s summary\n"
        "s{quantile=\"0.9\"} 1\n"
        "s_sum 2\n"
        "s_count 3\n"
        "s 4\n"                    // a summary's bare sample needs a quantile
        "s_bucket{le=\"1\"} 1\n";  // no buckets in a summary: a family of its own
    const MergedPages merged = merge({{"a", page}, {"b", "h_bucket{le=\"1\"} 5\nh_count 5\n"}});
    EXPECT_EQ(families(merged),
              "# TYPE h histogram\n"
              "h_bucket{backend=\"a\",le=\"0.5\"} 1\n"
              "h_bucket{backend=\"a\",le=\"+Inf\"} 2\n"
              "h_sum{backend=\"a\"} 3\n"
              "h_count{backend=\"a\"} 2\n"
              "h_bucket{backend=\"b\",le=\"1\"} 5\n"
              "h_count{backend=\"b\"} 5\n"
              "# TYPE s summary\n"
              "s{backend=\"a\",quantile=\"0.9\"} 1\n"
              "s_sum{backend=\"a\"} 2\n"
              "s_count{backend=\"a\"} 3\n"
              "s_bucket{backend=\"a\",le=\"1\"} 1\n");
    EXPECT_EQ(merged.pages[0].skipped, 3u);
}

// Found by the fuzz target: a bucket without le, read as a family of its
// own before the histogram was typed, would have been read back (by
// Prometheus too) as the histogram's.
TEST(MergeBackendPages, DropsAFamilyThatAHistogramOrSummaryShadows) {
    const MergedPages merged = merge({{"a", "# HELP h help\nh_bucket{engine=\"0\"} 6\n# TYPE s summary\n"},
                                      {"b",
                                       "# TYPE h histogram\nh_bucket{le=\"1\"} 2\n# TYPE s_count gauge\n"
                                       "s_count 3\n"}});
    EXPECT_EQ(families(merged),
              "# HELP h help\n# TYPE h histogram\nh_bucket{backend=\"b\",le=\"1\"} 2\n"
              "# TYPE s summary\n");
    EXPECT_EQ(merged.pages[0].samples, 0u);
    EXPECT_EQ(merged.pages[0].skipped, 1u);
    EXPECT_EQ(merged.pages[1].samples, 1u);
    EXPECT_EQ(merged.pages[1].skipped, 1u);
}

TEST(MergeBackendPages, RenamesABackendLabelAndLeavesDpgatesFamiliesAlone) {
    const MergedPages merged =
        merge({{"a", "x{backend=\"inner\"} 1\n# TYPE dpgate_backend_up gauge\ndpgate_backend_up 1\n"}});
    EXPECT_EQ(families(merged), "x{backend=\"a\",exported_backend=\"inner\"} 1\n");
    EXPECT_EQ(merged.pages[0].skipped, 2u);
}

TEST(MergeBackendPages, BoundsWhatAPageCosts) {
    MergeLimits limits;
    limits.max_line_bytes = 32;
    limits.max_labels = 2;
    limits.max_samples_per_page = 3;
    limits.max_families = 3;
    const std::string page =
        "a{x=\"1\",y=\"2\"} 1\n"
        "b{x=\"1\",y=\"2\",z=\"3\"} 1\n"  // three labels
        "c{x=\"" +
        std::string(40, 'v') +
        "\"} 1\n"  // a long line
        "d 1\ne 1\nf 1\ng 1\n";
    const MergedPages merged = merge({{"p", page}, {"q", "h 1\na 2\n"}}, limits);
    EXPECT_EQ(families(merged),
              "a{backend=\"p\",x=\"1\",y=\"2\"} 1\na{backend=\"q\"} 2\nd{backend=\"p\"} 1\n"
              "e{backend=\"p\"} 1\n");
    EXPECT_EQ(merged.pages[0].samples, 3u);
    EXPECT_EQ(merged.pages[0].skipped, 4u);
    EXPECT_EQ(merged.pages[1].samples, 1u);  // h would be a fourth family
    EXPECT_EQ(merged.pages[1].skipped, 1u);
}

TEST(MergeBackendPages, WhatItWritesReadsBackTheSame) {
    const MergedPages merged = merge({{"a", kPage}, {"b", kPage}, {"c", std::nullopt}});
    const MergedPages again = merge({{"z", merged.text}});
    // Everything but dpgate's own up gauge (HELP, TYPE, three samples) is read back.
    EXPECT_EQ(again.pages[0].samples, 16u);
    EXPECT_EQ(again.pages[0].skipped, 5u);
}

}  // namespace
}  // namespace dpgate::metrics
