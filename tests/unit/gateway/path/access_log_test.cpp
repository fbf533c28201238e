#include "gateway/path/access_log.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

namespace dpgate::gateway {
namespace {

using nlohmann::json;

AccessRecord relayed() {
    AccessRecord r;
    r.time =
        std::chrono::system_clock::time_point(std::chrono::milliseconds(1764681600123));  // 2025-12-02T13:20:00.123Z
    r.request_id = "req-1";
    r.method = "POST";
    r.path = "/v1/chat/completions";
    r.key_name = "alice";
    r.key_hash = "0123456789ab";
    r.backend = "primary";
    r.rank = 5;
    r.status = 200;
    r.stream = true;
    r.images = 2;
    r.usage = Usage{1200, 30, 1024};
    r.ttfb_seconds = 0.0125;
    r.bytes_in = 4096;
    r.bytes_out = 900;
    r.retries = 1;
    return r;
}

TEST(AccessLog, RelayedRequestIsOneJsonLineWithEveryField) {
    AccessRecord r = relayed();
    std::string line = formatAccessLine(r, r.started + std::chrono::milliseconds(250));
    ASSERT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1);
    json j = json::parse(line);
    EXPECT_EQ(j["time"], "2025-12-02T13:20:00.123Z");
    EXPECT_EQ(j["request_id"], "req-1");
    EXPECT_EQ(j["key"], "alice");
    EXPECT_EQ(j["key_hash"], "0123456789ab");
    EXPECT_EQ(j["backend"], "primary");
    EXPECT_EQ(j["rank"], 5);
    EXPECT_EQ(j["status"], 200);
    EXPECT_EQ(j["stream"], true);
    EXPECT_EQ(j["images"], 2);
    EXPECT_EQ(j["prompt_tokens"], 1200);
    EXPECT_EQ(j["cached_tokens"], 1024);
    EXPECT_EQ(j["completion_tokens"], 30);
    EXPECT_DOUBLE_EQ(j["ttfb_ms"].get<double>(), 12.5);
    EXPECT_DOUBLE_EQ(j["duration_ms"].get<double>(), 250.0);
    EXPECT_EQ(j["bytes_in"], 4096);
    EXPECT_EQ(j["bytes_out"], 900);
    EXPECT_EQ(j["retries"], 1);
    EXPECT_TRUE(j["rejection"].is_null());
}

// A connection's record serves its next request: reset gives the line a
// new record gives, and the strings keep their buffers.
TEST(AccessLog, ResetRecordIsANewRecordWithItsBuffersKept) {
    AccessRecord r = relayed();
    r.request_id = std::string(40, 'r');
    r.path = "/v1/chat/completions/with/a/long/path";
    r.rejection = "context_length_exceeded";
    r.stream_abort = "client";
    r.count_mismatch = AccessRecord::CountMismatch{5, 6};
    const char* id_buffer = r.request_id.data();
    const char* path_buffer = r.path.data();
    r.reset();

    EXPECT_TRUE(r.request_id.empty() && r.path.empty() && r.rejection.empty());
    EXPECT_EQ(r.stream_abort, nullptr);
    EXPECT_FALSE(r.count_mismatch.has_value());
    EXPECT_FALSE(r.usage.has_value());
    EXPECT_EQ(r.time, std::chrono::system_clock::time_point{});
    // An unset time is derived from the wall clock when the line is made:
    // fix it on both, so two lines made a moment apart can compare.
    AccessRecord fresh;
    fresh.started = r.started;
    fresh.time = r.time = relayed().time;
    const auto at = r.started + std::chrono::milliseconds(5);
    EXPECT_EQ(formatAccessLine(r, at), formatAccessLine(fresh, at));
    EXPECT_GE(r.started, AccessRecord{}.started - std::chrono::seconds(5));

    r.request_id.assign(32, 'x');
    r.path.assign("/v1/chat/completions");
    EXPECT_EQ(r.request_id.data(), id_buffer);
    EXPECT_EQ(r.path.data(), path_buffer);
}

// The stamp is built from <chrono>'s calendar, not gmtime_r: it must say
// what gmtime_r + strftime say, on any day (leap days, year ends, 2100).
TEST(AccessLog, TimeIsWhatGmtimeSaysToTheMillisecond) {
    // (A time of 0 means "not set": the line then takes the clock's.)
    std::vector<int64_t> millis = {
        1, 951782399999, 951782400000, 1709251199999, 1709251200000, 1735689599999, 4107542400000, 4102444799001};
    for (int64_t m = 1; m < 4102444800000; m += 7919LL * 3600 * 1000 + 123457) millis.push_back(m);
    for (int64_t m : millis) {
        AccessRecord r;
        r.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(m));
        std::time_t t = std::time_t(m / 1000);
        std::tm tm{};
        gmtime_r(&t, &tm);
        char expected[40];
        size_t n = std::strftime(expected, sizeof expected, "%Y-%m-%dT%H:%M:%S", &tm);
        std::snprintf(expected + n, sizeof expected - n, ".%03dZ", int(m % 1000));
        EXPECT_EQ(json::parse(formatAccessLine(r, r.started))["time"], std::string(expected)) << m;
    }
}

// Durations are printed from whole microseconds, as "%.3f" of milliseconds.
TEST(AccessLog, MillisecondsHaveThreeDecimalsFromMicroseconds) {
    AccessRecord r = relayed();
    r.ttfb_seconds = 1.2345678;
    std::string line = formatAccessLine(r, r.started + std::chrono::microseconds(61'000'007));
    EXPECT_NE(line.find("\"ttfb_ms\":1234.568,"), std::string::npos) << line;
    EXPECT_NE(line.find("\"duration_ms\":61000.007,"), std::string::npos) << line;
    r.ttfb_seconds = 0.0;
    line = formatAccessLine(r, r.started);
    EXPECT_NE(line.find("\"ttfb_ms\":0.000,\"duration_ms\":0.000,"), std::string::npos) << line;
}

// Lines append to the worker's batch: each whole, one after the other.
TEST(AccessLog, LinesAppendToTheBatch) {
    std::string batch = "earlier\n";
    AccessRecord r = relayed();
    appendAccessLine(batch, r, r.started);
    appendAccessLine(batch, r, r.started);
    EXPECT_EQ(batch, "earlier\n" + formatAccessLine(r, r.started) + formatAccessLine(r, r.started));
}

TEST(AccessLog, UnknownFactsAreNullNotZero) {
    AccessRecord r;
    r.request_id = "r";
    r.status = 401;
    r.rejection = "invalid_api_key";
    json j = json::parse(formatAccessLine(r, r.started));
    EXPECT_TRUE(j["key"].is_null());
    EXPECT_TRUE(j["key_hash"].is_null());
    EXPECT_TRUE(j["backend"].is_null());
    EXPECT_TRUE(j["rank"].is_null());
    EXPECT_TRUE(j["prompt_tokens"].is_null());
    EXPECT_TRUE(j["ttfb_ms"].is_null());
    EXPECT_EQ(j["rejection"], "invalid_api_key");
}

TEST(AccessLog, ClientChosenTextIsEscapedAndAlwaysValidUtf8) {
    AccessRecord r;
    r.request_id = std::string("a\"b\\c\nd\x01\x7f", 9) + "\xc3\xa9" + "\xff\xfe" + "\xe2\x82";  // é, then junk
    r.path = "/v1/\xf0\x9f\x98\x80";                                                             // an emoji, 4 bytes
    std::string line = formatAccessLine(r, r.started);
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "a raw newline would split the line";
    json j = json::parse(line);  // throws on invalid UTF-8
    EXPECT_EQ(j["request_id"],
              std::string("a\"b\\c\nd\x01\x7f", 9) + "\xc3\xa9" + "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    EXPECT_EQ(j["path"], "/v1/\xf0\x9f\x98\x80");
}

TEST(AccessLog, FileSinkAppendsAndOffIsDisabled) {
    EXPECT_FALSE(AccessLogSink::open("off")->enabled());
    EXPECT_TRUE(AccessLogSink::open("stdout")->enabled());
    std::string path = ::testing::TempDir() + "dpgate-access-test.log";
    std::remove(path.c_str());
    {
        auto sink = AccessLogSink::open(path);
        sink->write("one\n");
        sink->write("two\n");
    }
    AccessLogSink::open(path)->write("three\n");
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), "one\ntwo\nthree\n");
    std::remove(path.c_str());
    EXPECT_THROW(AccessLogSink::open("/nonexistent-dir/x/access.log"), std::runtime_error);
}

}  // namespace
}  // namespace dpgate::gateway
