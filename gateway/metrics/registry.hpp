// Owns metric families and renders them all as one Prometheus text page
// (format 0.0.4, `Content-Type: text/plain; version=0.0.4`).
#pragma once

#include "gateway/metrics/metric_family.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dpgate::metrics {

inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

class Registry {
public:
    // Registration happens at startup. Names and label names are checked
    // against the Prometheus grammar; a bad or duplicate name throws
    // std::invalid_argument. Families with no label names get their single
    // child created here, so they render as 0 before the first update.
    CounterFamily& counter(std::string name, std::string help, std::vector<std::string> label_names = {});
    GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> label_names = {});
    HistogramFamily& histogram(std::string name, std::string help, std::vector<double> upper_bounds,
                               std::vector<std::string> label_names = {});

    // Families in registration order.
    std::string render() const;
    std::vector<std::string> familyNames() const;

private:
    void checkNew(const std::string& name, const std::vector<std::string>& label_names) const;

    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<FamilyBase>> families_;
};

}  // namespace dpgate::metrics
