// Prometheus-style metrics without a global lock on the hot path. A family
// (name, help, label names) owns one child per label-value tuple; a child is
// created once under the family's own lock and lives as long as the family,
// so callers cache the reference and each update is a relaxed atomic add.
// Rendering walks the children and may lock (it runs on a scrape, not per
// request).
#pragma once

#include "gateway/metrics/sharded_count.hpp"

#include <atomic>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dpgate::metrics {

// Monotonic count (requests, tokens). Integer-valued: everything dpgate
// counts is a whole number. Sharded by thread (sharded_count.hpp): the
// workers add to the same children on every request.
//
// It never goes down, whatever it is handed (some amounts come from a
// backend's answer): a negative amount is refused, a sum past 2^64 - 1
// stays at 2^64 - 1 instead of wrapping (Prometheus would read a counter
// that went down as a restart), and a fraction, NaN or infinity does not
// compile.
class Counter {
public:
    template <std::integral T = uint64_t>
    void inc(T n = 1) {
        if constexpr (std::is_signed_v<T>)
            if (n < 0) return;
        count_.addSaturating(uint64_t(n));
    }
    template <std::floating_point T>
    void inc(T n) = delete;
    uint64_t value() const { return count_.saturatedValue(); }

private:
    ShardedCount<uint64_t> count_;
};

// A value that goes up and down. Either set (up/down, the window size: one
// writer, now and then) or moved by inc/dec (requests in flight: every
// worker, per request, sharded like a counter); the value is the last set
// plus the moves. Set a gauge or move it, not both.
class Gauge {
public:
    void set(int64_t v) { base_.store(v, std::memory_order_relaxed); }
    void inc(int64_t n = 1) { moves_.add(n); }
    void dec(int64_t n = 1) { moves_.sub(n); }
    int64_t value() const { return base_.load(std::memory_order_relaxed) + moves_.value(); }

private:
    std::atomic<int64_t> base_{0};
    ShardedCount<int64_t> moves_;
};

// Fixed upper bounds, ascending; +Inf is implicit. Buckets are stored
// per-interval (not cumulative) so an observation touches one bucket; the
// count is the sum of the buckets at render time, which keeps _count equal to
// the +Inf bucket in every scrape.
//
// Every request observes three histograms from whichever worker thread
// serves it: the buckets and the sum are sharded by thread (kShards copies,
// each on its own cache lines) so workers do not bounce one line between
// cores; a scrape adds the shards up.
class Histogram {
public:
    // Bounds must be ascending and finite (checked by the family).
    explicit Histogram(std::vector<double> upper_bounds);

    // Every histogram dpgate keeps observes a duration: a value below zero,
    // NaN or infinite is refused, so that _sum, which Prometheus reads as a
    // counter, never goes down nor stops being a number.
    void observe(double value);

    struct Snapshot {
        std::vector<uint64_t> cumulative;  // one per bound, then +Inf
        double sum = 0;
        uint64_t count = 0;
    };
    Snapshot snapshot() const;
    const std::vector<double>& upperBounds() const { return upper_bounds_; }

private:
    struct alignas(64) Line {
        std::atomic<uint64_t> value[8] = {};
    };
    struct alignas(64) Sum {
        std::atomic<double> value{0};
    };
    std::atomic<uint64_t>& bucket(size_t shard, size_t i) const {
        return lines_[shard * lines_per_shard_ + i / 8].value[i % 8];
    }

    std::vector<double> upper_bounds_;
    size_t lines_per_shard_;
    std::unique_ptr<Line[]> lines_;  // kShards x (bounds + 1) buckets
    std::unique_ptr<Sum[]> sums_;    // kShards
};

enum class MetricType { counter, gauge, histogram };

class FamilyBase {
public:
    FamilyBase(std::string name, std::string help, std::vector<std::string> label_names, MetricType type);
    virtual ~FamilyBase() = default;
    FamilyBase(const FamilyBase&) = delete;
    FamilyBase& operator=(const FamilyBase&) = delete;

    const std::string& name() const { return name_; }
    const std::string& help() const { return help_; }
    MetricType type() const { return type_; }
    const std::vector<std::string>& labelNames() const { return label_names_; }

    // Appends this family in text format 0.0.4 (HELP, TYPE, one line per
    // child, or per bucket/_sum/_count for histograms).
    void render(std::string& out) const;

protected:
    // Children sorted by label values: a scrape is deterministic.
    using LabelValues = std::vector<std::string>;
    void checkArity(size_t n) const;
    virtual void renderChildren(std::string& out) const = 0;
    // `name{a="x",b="y"` without the closing brace (histograms append le).
    void appendSeriesStart(std::string& out, std::string_view suffix, const LabelValues& values) const;
    // One full sample line: `name{labels} value` (no braces without labels).
    void appendSample(std::string& out, std::string_view suffix, const LabelValues& values, double value) const;

    mutable std::shared_mutex mutex_;

private:
    std::string name_;
    std::string help_;
    std::vector<std::string> label_names_;
    MetricType type_;
};

template <typename Child>
class Family : public FamilyBase {
public:
    using FamilyBase::FamilyBase;

    // The child for these label values, created on first use. The reference
    // stays valid for the family's lifetime: cache it on the hot path.
    // Throws std::invalid_argument if the number of values is wrong
    // (a programmer error, not input).
    Child& with(std::initializer_list<std::string_view> values) {
        return with(LabelValues(values.begin(), values.end()));
    }
    Child& with(const LabelValues& values);
    // The child for these label values if one was created; a reader (the
    // admin status) does not add series to the scrape.
    const Child* find(const LabelValues& values) const {
        std::shared_lock lock(mutex_);
        auto it = children_.find(values);
        return it == children_.end() ? nullptr : it->second.get();
    }

protected:
    virtual std::unique_ptr<Child> makeChild() const {
        if constexpr (std::is_default_constructible_v<Child>) return std::make_unique<Child>();
        else return nullptr;  // HistogramFamily overrides: children need the bounds
    }
    void renderChildren(std::string& out) const override;

    std::map<LabelValues, std::unique_ptr<Child>> children_;
};

class HistogramFamily : public Family<Histogram> {
public:
    HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                    std::vector<double> upper_bounds);
    const std::vector<double>& upperBounds() const { return upper_bounds_; }

protected:
    std::unique_ptr<Histogram> makeChild() const override { return std::make_unique<Histogram>(upper_bounds_); }
    void renderChildren(std::string& out) const override;

private:
    std::vector<double> upper_bounds_;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;

// Prometheus number formatting: shortest round-trip decimal, +Inf/-Inf/NaN.
void appendNumber(std::string& out, double value);
// Escapes a label value (backslash, double quote, newline).
void appendEscapedLabelValue(std::string& out, std::string_view value);
// Escapes HELP text (backslash, newline).
void appendEscapedHelp(std::string& out, std::string_view help);

template <typename Child>
Child& Family<Child>::with(const LabelValues& values) {
    checkArity(values.size());
    {
        std::shared_lock lock(mutex_);
        auto it = children_.find(values);
        if (it != children_.end()) return *it->second;
    }
    std::unique_lock lock(mutex_);
    auto [it, inserted] = children_.try_emplace(values);
    if (inserted) it->second = makeChild();
    return *it->second;
}

template <typename Child>
void Family<Child>::renderChildren(std::string& out) const {
    // Counters and gauges; histograms override.
    if constexpr (requires(const Child& c) { c.value(); }) {
        for (const auto& [values, child] : children_)
            appendSample(out, "", values, static_cast<double>(child->value()));
    }
}

}  // namespace dpgate::metrics
