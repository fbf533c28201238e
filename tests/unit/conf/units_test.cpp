// Byte sizes and durations: integers, or strings with a unit.
#include "conf/config.hpp"
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

namespace dpgate::conf {
namespace {

using test::errorOf;
using test::minimal_backends;

LimitsConfig limitsOf(const std::string& limits_yaml) {
    return loadConfigText(std::string("limits:\n") + limits_yaml + minimal_backends, ".", {.check_files = false})
        .limits;
}

TEST(Units, BytesTakeIntegersOrBinaryUnits) {
    EXPECT_EQ(limitsOf("  max_body_bytes: 1000\n").max_body_bytes, 1000u);
    EXPECT_EQ(limitsOf("  max_body_bytes: 10B\n").max_body_bytes, 10u);
    EXPECT_EQ(limitsOf("  max_body_bytes: 64KiB\n").max_body_bytes, 64u * 1024);
    EXPECT_EQ(limitsOf("  max_body_bytes: 256MiB\n").max_body_bytes, 256u << 20);
    EXPECT_EQ(limitsOf("  max_body_bytes: \"64 MiB\"\n").max_body_bytes, 64u << 20);
    EXPECT_EQ(limitsOf("  max_body_bytes: 2GiB\n").max_body_bytes, 2ull << 30);
    EXPECT_EQ(limitsOf("  max_body_bytes: 1TiB\n").max_body_bytes, 1ull << 40);
    EXPECT_EQ(limitsOf("  relay_buffer_bytes: 16KiB\n").relay_buffer_bytes, 16u * 1024);
    EXPECT_EQ(limitsOf("  offload_admission_bytes: 0\n").offload_admission_bytes, 0u);
    EXPECT_EQ(limitsOf("  offload_admission_bytes: 1MiB\n").offload_admission_bytes, 1u << 20);
    EXPECT_EQ(limitsOf("  max_buffered_body_bytes: 4GiB\n").max_buffered_body_bytes, 4ull << 30);
    // Unset, the process-wide budget is never below one whole body.
    EXPECT_EQ(limitsOf("  max_body_bytes: 2GiB\n").max_buffered_body_bytes, 2ull << 30);
    EXPECT_EQ(limitsOf("  max_body_bytes: 1MiB\n").max_buffered_body_bytes, 1ull << 30);
}

TEST(Units, DurationsTakeIntegerMillisecondsOrUnits) {
    EXPECT_EQ(limitsOf("  header_timeout_ms: 1500\n").header_timeout_ms, 1500u);
    EXPECT_EQ(limitsOf("  header_timeout_ms: 250ms\n").header_timeout_ms, 250u);
    EXPECT_EQ(limitsOf("  header_timeout_ms: 10s\n").header_timeout_ms, 10000u);
    EXPECT_EQ(limitsOf("  header_timeout_ms: 30min\n").header_timeout_ms, 30u * 60 * 1000);
    EXPECT_EQ(limitsOf("  upstream_first_byte_timeout_ms: 2h\n").upstream_first_byte_timeout_ms, 2u * 3600 * 1000);
    EXPECT_EQ(limitsOf("  drain_timeout_ms: 0\n").drain_timeout_ms, 0u);
}

TEST(Units, RejectsMalformedSizes) {
    const std::string expected = "expected a byte count (an integer, or e.g. 256MiB), got ";
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: 5MB\n"),
              "conf: limits.max_body_bytes: line 2: " + expected + "\"5MB\"");
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: 1.5GiB\n"),
              "conf: limits.max_body_bytes: line 2: " + expected + "\"1.5GiB\"");
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: MiB\n"),
              "conf: limits.max_body_bytes: line 2: " + expected + "\"MiB\"");
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: -1\n"),
              "conf: limits.max_body_bytes: line 2: " + expected + "\"-1\"");
    // A bare number in quotes is a string, like every other integer field.
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: \"1000\"\n"),
              "conf: limits.max_body_bytes: line 2: " + expected + "\"1000\"");
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: [1]\n"),
              "conf: limits.max_body_bytes: line 2: " + expected + "a sequence");
}

TEST(Units, SizesOutsideTheirRangeNameTheRange) {
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: 0\n"),
              "conf: limits.max_body_bytes: line 2: must be between 1 and 1099511627776, got 0");
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: 2TiB\n"),
              "conf: limits.max_body_bytes: line 2: must be between 1 and 1099511627776, got 2199023255552");
    EXPECT_EQ(errorOf("limits:\n  max_body_bytes: 99999999999999TiB\n"),
              "conf: limits.max_body_bytes: line 2: must be between 1 and 1099511627776, got \"99999999999999TiB\"");
    EXPECT_EQ(errorOf("limits:\n  max_header_bytes: 512\n"),
              "conf: limits.max_header_bytes: line 2: must be between 1024 and 67108864, got 512");
}

TEST(Units, RejectsMalformedDurations) {
    const std::string expected = "expected milliseconds (an integer, or e.g. 10s), got ";
    EXPECT_EQ(errorOf("limits:\n  header_timeout_ms: 1.5s\n"),
              "conf: limits.header_timeout_ms: line 2: " + expected + "\"1.5s\"");
    EXPECT_EQ(errorOf("limits:\n  header_timeout_ms: 10m\n"),
              "conf: limits.header_timeout_ms: line 2: " + expected + "\"10m\"");
    EXPECT_EQ(errorOf("limits:\n  header_timeout_ms: -5\n"),
              "conf: limits.header_timeout_ms: line 2: " + expected + "\"-5\"");
    EXPECT_EQ(errorOf("limits:\n  header_timeout_ms: 0\n"),
              "conf: limits.header_timeout_ms: line 2: must be between 1 and 604800000 ms, got 0");
    EXPECT_EQ(errorOf("health:\n  interval_ms: 8d\n"), "conf: health.interval_ms: line 2: " + expected + "\"8d\"");
    EXPECT_EQ(errorOf("health:\n  interval_ms: 169h\n"),
              "conf: health.interval_ms: line 2: must be between 1 and 604800000 ms, got 608400000");
}

}  // namespace
}  // namespace dpgate::conf
