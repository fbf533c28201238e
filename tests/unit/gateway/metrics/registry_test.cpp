#include "gateway/metrics/registry.hpp"
#include "gateway/metrics/sharded_count.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dpgate::metrics {
namespace {

TEST(Registry, CounterRendersExactText) {
    Registry r;
    auto& f = r.counter("req_total", "Requests.", {"endpoint", "code"});
    f.with({"/v1/chat", "200"}).inc(3);
    f.with({"/v1/chat", "429"}).inc();
    f.with({"/v1/chat", "200"}).inc(2);
    EXPECT_EQ(r.render(),
              "# HELP req_total Requests.\n"
              "# TYPE req_total counter\n"
              "req_total{endpoint=\"/v1/chat\",code=\"200\"} 5\n"
              "req_total{endpoint=\"/v1/chat\",code=\"429\"} 1\n");
}

TEST(Registry, UnlabelledFamiliesRenderZeroBeforeFirstUpdate) {
    Registry r;
    r.counter("flips_total", "Flips.");
    r.gauge("window_tokens", "Window.");
    EXPECT_EQ(r.render(),
              "# HELP flips_total Flips.\n# TYPE flips_total counter\nflips_total 0\n"
              "# HELP window_tokens Window.\n# TYPE window_tokens gauge\nwindow_tokens 0\n");
}

TEST(Registry, GaugeGoesUpAndDownAndNegative) {
    Registry r;
    auto& g = r.gauge("inflight", "In flight.", {"backend", "rank"});
    auto& child = g.with({"primary", "3"});
    child.inc();
    child.inc(4);
    child.dec(2);
    r.gauge("offset", "Offset.").with({}).set(-7);
    EXPECT_EQ(r.render(),
              "# HELP inflight In flight.\n# TYPE inflight gauge\ninflight{backend=\"primary\",rank=\"3\"} 3\n"
              "# HELP offset Offset.\n# TYPE offset gauge\noffset -7\n");
}

TEST(Registry, HistogramRendersCumulativeBucketsSumAndCount) {
    Registry r;
    auto& h = r.histogram("lat_seconds", "Latency.", {0.1, 1, 2.5}).with({});
    h.observe(0.05);
    h.observe(0.1);  // on the bound: le is inclusive
    h.observe(2);
    h.observe(100);
    EXPECT_EQ(r.render(),
              "# HELP lat_seconds Latency.\n"
              "# TYPE lat_seconds histogram\n"
              "lat_seconds_bucket{le=\"0.1\"} 2\n"
              "lat_seconds_bucket{le=\"1\"} 2\n"
              "lat_seconds_bucket{le=\"2.5\"} 3\n"
              "lat_seconds_bucket{le=\"+Inf\"} 4\n"
              "lat_seconds_sum 102.15\n"
              "lat_seconds_count 4\n");
}

TEST(Registry, LabelledHistogramPutsLeLast) {
    Registry r;
    auto& f = r.histogram("ttfb_seconds", "TTFB.", {1}, {"backend"});
    f.with({"standby"}).observe(0.5);
    EXPECT_EQ(r.render(),
              "# HELP ttfb_seconds TTFB.\n"
              "# TYPE ttfb_seconds histogram\n"
              "ttfb_seconds_bucket{backend=\"standby\",le=\"1\"} 1\n"
              "ttfb_seconds_bucket{backend=\"standby\",le=\"+Inf\"} 1\n"
              "ttfb_seconds_sum{backend=\"standby\"} 0.5\n"
              "ttfb_seconds_count{backend=\"standby\"} 1\n");
}

TEST(Registry, EscapesLabelValuesAndHelp) {
    Registry r;
    auto& f = r.counter("x_total", "Back\\slash and\nnewline \"quotes\" stay.", {"v"});
    f.with({"a\\b\"c\nd"}).inc();
    EXPECT_EQ(r.render(),
              "# HELP x_total Back\\\\slash and\\nnewline \"quotes\" stay.\n"
              "# TYPE x_total counter\n"
              "x_total{v=\"a\\\\b\\\"c\\nd\"} 1\n");
}

TEST(Registry, ChildReferenceIsStable) {
    Registry r;
    auto& f = r.counter("c_total", "C.", {"k"});
    Counter& first = f.with({"a"});
    for (int i = 0; i < 1000; ++i) f.with({std::to_string(i)});  // map grows, nodes stay
    EXPECT_EQ(&first, &f.with({"a"}));
}

TEST(Registry, RejectsBadNamesArityAndBuckets) {
    Registry r;
    r.counter("ok_total", "ok");
    EXPECT_THROW(r.counter("ok_total", "dup"), std::invalid_argument);
    EXPECT_THROW(r.counter("1bad", "x"), std::invalid_argument);
    EXPECT_THROW(r.counter("bad-name", "x"), std::invalid_argument);
    EXPECT_THROW(r.counter("y_total", "x", {"__reserved"}), std::invalid_argument);
    EXPECT_THROW(r.counter("z_total", "x", {"a:b"}), std::invalid_argument);
    EXPECT_THROW(r.histogram("h1", "x", {1, 1}), std::invalid_argument);
    EXPECT_THROW(r.histogram("h2", "x", {2, 1}), std::invalid_argument);
    EXPECT_THROW(r.histogram("h3", "x", {1}, {"le"}), std::invalid_argument);
    auto& f = r.counter("two_total", "x", {"a", "b"});
    EXPECT_THROW(f.with({"only-one"}), std::invalid_argument);
    EXPECT_EQ(r.familyNames(), (std::vector<std::string>{"ok_total", "two_total"}));
}

TEST(Registry, NumberFormatting) {
    std::string out;
    appendNumber(out, 1e15);  // token counters get large: no exponent below 2^53
    out += ' ';
    appendNumber(out, 1e20);
    out += ' ';
    appendNumber(out, 0.001);
    out += ' ';
    appendNumber(out, -0.5);
    out += ' ';
    appendNumber(out, 1.0 / 0.0);
    EXPECT_EQ(out, "1000000000000000 1e+20 0.001 -0.5 +Inf");
}

TEST(Registry, ConcurrentUpdatesAreExact) {
    Registry r;
    auto& counters = r.counter("c_total", "C.", {"rank"});
    auto& gauge = r.gauge("g", "G.").with({});
    auto& hist = r.histogram("h", "H.", {0.5, 1.5}).with({});
    constexpr int kThreads = 4;
    constexpr int kIters = 100000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            // Half the threads look the child up each time (the create path
            // racing with itself), half use a cached reference.
            Counter& cached = counters.with({"0"});
            for (int i = 0; i < kIters; ++i) {
                if (t % 2) counters.with({"0"}).inc();
                else cached.inc();
                counters.with({std::to_string(i % 8)}).inc(2);
                gauge.inc();
                gauge.dec();
                gauge.inc();
                hist.observe(i % 2 ? 1.0 : 0.25);  // exact in binary: the sum is exact
            }
        });
    }
    // Render concurrently too: it must not block writers forever or crash.
    for (int i = 0; i < 20; ++i) (void)r.render();
    for (auto& th : threads) th.join();
    EXPECT_EQ(counters.with({"0"}).value(), uint64_t{kThreads} * kIters + uint64_t{kThreads} * kIters / 8 * 2);
    EXPECT_EQ(counters.with({"7"}).value(), uint64_t{kThreads} * kIters / 8 * 2);
    EXPECT_EQ(gauge.value(), kThreads * kIters);
    const auto s = hist.snapshot();
    EXPECT_EQ(s.count, uint64_t{kThreads} * kIters);
    EXPECT_EQ(s.cumulative[0], uint64_t{kThreads} * kIters / 2);
    EXPECT_DOUBLE_EQ(s.sum, kThreads * (kIters / 2) * 1.25);
}

}  // namespace
}  // namespace dpgate::metrics

namespace dpgate::metrics {
namespace {

TEST(Histogram, ObservationsFromManyThreadsAreAllCounted) {
    Histogram h({0.5, 1.0});
    std::vector<std::thread> threads;
    for (int t = 0; t < 12; ++t)
        threads.emplace_back([&h, t] {
            // Half own a cell (as workers do) and add without locked
            // instructions; the other half share cells.
            std::optional<ShardOwner> owner;
            if (t % 2 == 0) owner.emplace();
            for (int i = 0; i < 10000; ++i) h.observe(t % 3 == 0 ? 0.25 : t % 3 == 1 ? 0.75 : 2.0);
        });
    for (auto& thread : threads) thread.join();
    Histogram::Snapshot s = h.snapshot();
    EXPECT_EQ(s.count, 120000u);
    EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{40000, 80000, 120000}));
    EXPECT_DOUBLE_EQ(s.sum, 40000 * 0.25 + 40000 * 0.75 + 40000 * 2.0);
}

}  // namespace
}  // namespace dpgate::metrics
