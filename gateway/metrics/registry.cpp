#include "gateway/metrics/registry.hpp"

#include <stdexcept>

namespace dpgate::metrics {
namespace {

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; label names exclude ':' and
// the reserved "__" prefix.
bool validName(const std::string& name, bool allow_colon) {
    if (name.empty()) return false;
    for (size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
        const bool digit = c >= '0' && c <= '9';
        if (!(alpha || (i > 0 && digit))) return false;
    }
    return true;
}

}  // namespace

void Registry::checkNew(const std::string& name, const std::vector<std::string>& label_names) const {
    if (!validName(name, true)) throw std::invalid_argument("metrics: invalid metric name '" + name + "'");
    for (const auto& l : label_names)
        if (!validName(l, false) || l.starts_with("__"))
            throw std::invalid_argument("metrics: " + name + ": invalid label name '" + l + "'");
    for (const auto& f : families_)
        if (f->name() == name) throw std::invalid_argument("metrics: duplicate metric name '" + name + "'");
}

CounterFamily& Registry::counter(std::string name, std::string help, std::vector<std::string> label_names) {
    std::lock_guard lock(mutex_);
    checkNew(name, label_names);
    auto family =
        std::make_unique<CounterFamily>(std::move(name), std::move(help), std::move(label_names), MetricType::counter);
    if (family->labelNames().empty()) family->with({});
    auto& ref = *family;
    families_.push_back(std::move(family));
    return ref;
}

GaugeFamily& Registry::gauge(std::string name, std::string help, std::vector<std::string> label_names) {
    std::lock_guard lock(mutex_);
    checkNew(name, label_names);
    auto family =
        std::make_unique<GaugeFamily>(std::move(name), std::move(help), std::move(label_names), MetricType::gauge);
    if (family->labelNames().empty()) family->with({});
    auto& ref = *family;
    families_.push_back(std::move(family));
    return ref;
}

HistogramFamily& Registry::histogram(std::string name, std::string help, std::vector<double> upper_bounds,
                                     std::vector<std::string> label_names) {
    std::lock_guard lock(mutex_);
    checkNew(name, label_names);
    auto family = std::make_unique<HistogramFamily>(std::move(name), std::move(help), std::move(label_names),
                                                    std::move(upper_bounds));
    if (family->labelNames().empty()) family->with({});
    auto& ref = *family;
    families_.push_back(std::move(family));
    return ref;
}

std::string Registry::render() const {
    std::lock_guard lock(mutex_);
    std::string out;
    out.reserve(4096);
    for (const auto& f : families_) f->render(out);
    return out;
}

std::vector<std::string> Registry::familyNames() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> names;
    for (const auto& f : families_) names.push_back(f->name());
    return names;
}

}  // namespace dpgate::metrics
