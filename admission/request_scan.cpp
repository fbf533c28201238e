#include "admission/request_scan.hpp"

#include "admission/request_scan_kernel.hpp"

#include <simdjson.h>

#include <stdexcept>

namespace dpgate::admission {

std::vector<std::string> RequestScanner::supportedKernels() {
    std::vector<std::string> kernels;
#if DPGATE_HAS_HASWELL_SCAN
    // simdjson's CPU detection decides, as it does for its own stage 1 (and
    // SIMDJSON_FORCE_IMPLEMENTATION overrides it the same way): the haswell
    // build runs where simdjson would run haswell or its superset, icelake.
    const std::string active = simdjson::get_active_implementation()->name();
    if ((active == "haswell" || active == "icelake") && std::string(scan_baseline::kernelName()) != "haswell")
        kernels.emplace_back(scan_haswell::kernelName());
#endif
    kernels.emplace_back(scan_baseline::kernelName());
    return kernels;
}

const std::string& RequestScanner::bestKernel() {
    static const std::string best = supportedKernels().front();
    return best;
}

RequestScanner::RequestScanner() : RequestScanner(bestKernel()) {}

RequestScanner::RequestScanner(std::string_view kernel) : kernel_name_(kernel) {
    if (kernel == scan_baseline::kernelName()) {
        kernel_ = scan_baseline::makeScanner();
        return;
    }
#if DPGATE_HAS_HASWELL_SCAN
    for (const std::string& supported : supportedKernels())
        if (kernel == supported && kernel == scan_haswell::kernelName()) kernel_ = scan_haswell::makeScanner();
#endif
    if (!kernel_)
        throw std::invalid_argument("request scan: kernel '" + std::string(kernel) + "' is not supported here");
}

RequestScanner::~RequestScanner() = default;

std::optional<ScanError> RequestScanner::scan(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                                              jinja::Arena& arena, ScannedRequest& out) {
    return kernel_->scan(body, capacity_bytes, endpoint, arena, out);
}

}  // namespace dpgate::admission
