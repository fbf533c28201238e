#include "gateway/metrics/metric_family.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace dpgate::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      lines_per_shard_((upper_bounds_.size() + 1 + 7) / 8),
      lines_(std::make_unique<Line[]>(kShards * lines_per_shard_)),
      sums_(std::make_unique<Sum[]>(kShards)) {}

void Histogram::observe(double value) {
    if (!(value >= 0 && value <= std::numeric_limits<double>::max())) return;
    // Linear scan: ~15 bounds, cheaper than a branchy binary search.
    size_t i = 0;
    while (i < upper_bounds_.size() && value > upper_bounds_[i]) ++i;
    const shard_detail::ThreadShard& shard = shard_detail::assigned();
    shard_detail::addTo(bucket(shard.index, i), uint64_t{1}, shard.owned);
    shard_detail::addTo(sums_[shard.index].value, value, shard.owned);  // shared: a CAS loop
}

Histogram::Snapshot Histogram::snapshot() const {
    Snapshot s;
    s.cumulative.resize(upper_bounds_.size() + 1);
    uint64_t running = 0;
    for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
        for (size_t shard = 0; shard < kShards; ++shard) running += bucket(shard, i).load(std::memory_order_relaxed);
        s.cumulative[i] = running;
    }
    s.count = running;
    for (size_t shard = 0; shard < kShards; ++shard) s.sum += sums_[shard].value.load(std::memory_order_relaxed);
    return s;
}

FamilyBase::FamilyBase(std::string name, std::string help, std::vector<std::string> label_names, MetricType type)
    : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)), type_(type) {}

void FamilyBase::checkArity(size_t n) const {
    if (n != label_names_.size())
        throw std::invalid_argument("metrics: " + name_ + " takes " + std::to_string(label_names_.size()) +
                                    " label values, got " + std::to_string(n));
}

void FamilyBase::render(std::string& out) const {
    out += "# HELP ";
    out += name_;
    out += ' ';
    appendEscapedHelp(out, help_);
    out += "\n# TYPE ";
    out += name_;
    switch (type_) {
        case MetricType::counter: out += " counter\n"; break;
        case MetricType::gauge: out += " gauge\n"; break;
        case MetricType::histogram: out += " histogram\n"; break;
    }
    std::shared_lock lock(mutex_);
    renderChildren(out);
}

void FamilyBase::appendSeriesStart(std::string& out, std::string_view suffix, const LabelValues& values) const {
    out += name_;
    out += suffix;
    out += '{';
    for (size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += label_names_[i];
        out += "=\"";
        appendEscapedLabelValue(out, values[i]);
        out += '"';
    }
}

void FamilyBase::appendSample(std::string& out, std::string_view suffix, const LabelValues& values,
                              double value) const {
    if (values.empty()) {
        out += name_;
        out += suffix;
    } else {
        appendSeriesStart(out, suffix, values);
        out += '}';
    }
    out += ' ';
    appendNumber(out, value);
    out += '\n';
}

HistogramFamily::HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                                 std::vector<double> upper_bounds)
    : Family<Histogram>(std::move(name), std::move(help), std::move(label_names), MetricType::histogram),
      upper_bounds_(std::move(upper_bounds)) {
    for (const auto& l : labelNames())
        if (l == "le") throw std::invalid_argument("metrics: " + this->name() + ": label name le is reserved");
    for (size_t i = 0; i < upper_bounds_.size(); ++i) {
        if (!std::isfinite(upper_bounds_[i]) || (i && upper_bounds_[i] <= upper_bounds_[i - 1]))
            throw std::invalid_argument("metrics: " + this->name() + ": bucket bounds must be finite and ascending");
    }
}

void HistogramFamily::renderChildren(std::string& out) const {
    for (const auto& [values, child] : children_) {
        const Histogram::Snapshot s = child->snapshot();
        for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
            appendSeriesStart(out, "_bucket", values);
            if (!values.empty()) out += ',';
            out += "le=\"";
            if (i < upper_bounds_.size()) appendNumber(out, upper_bounds_[i]);
            else out += "+Inf";
            out += "\"} ";
            appendNumber(out, static_cast<double>(s.cumulative[i]));
            out += '\n';
        }
        appendSample(out, "_sum", values, s.sum);
        appendSample(out, "_count", values, static_cast<double>(s.count));
    }
}

void appendNumber(std::string& out, double value) {
    if (std::isnan(value)) {
        out += "NaN";
        return;
    }
    if (std::isinf(value)) {
        out += value > 0 ? "+Inf" : "-Inf";
        return;
    }
    char buf[64];
    // Whole numbers below 2^53 print as integers ("42", not "4.2e+01").
    if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(value));
        out.append(buf, end);
        return;
    }
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, end);
}

void appendEscapedLabelValue(std::string& out, std::string_view value) {
    for (char c : value) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '"': out += "\\\""; break;
            case '\n': out += "\\n"; break;
            default: out += c;
        }
    }
}

void appendEscapedHelp(std::string& out, std::string_view help) {
    for (char c : help) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            default: out += c;
        }
    }
}

}  // namespace dpgate::metrics
