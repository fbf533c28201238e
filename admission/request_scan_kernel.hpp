// The request scanner as compiled for one simdjson kernel (On Demand is
// compiled for one kernel per translation unit: request_scan_kernel.ipp).
// Internal to admission/: RequestScanner chooses among these.
#pragma once

#include "admission/request_scan.hpp"

#include <memory>

namespace dpgate::admission {

class ScanKernel {
public:
    virtual ~ScanKernel() = default;
    virtual std::optional<ScanError> scan(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                                          jinja::Arena& arena, ScannedRequest& out) = 0;
};

// The kernel the compiler flags give (the portable fallback on baseline x86-64).
namespace scan_baseline {
const char* kernelName();  // simdjson's name for it
std::unique_ptr<ScanKernel> makeScanner();
}  // namespace scan_baseline

#if defined(__x86_64__) && defined(__GNUC__)
#define DPGATE_HAS_HASWELL_SCAN 1
// AVX2, BMI1, PCLMUL, LZCNT: only on a CPU simdjson finds them on.
namespace scan_haswell {
const char* kernelName();
std::unique_ptr<ScanKernel> makeScanner();
}  // namespace scan_haswell
#endif

}  // namespace dpgate::admission
