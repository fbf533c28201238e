// The request scanner built for simdjson's haswell kernel (AVX2, BMI1,
// PCLMUL, LZCNT) in a baseline x86-64 build. simdjson compiles On Demand for
// one kernel per translation unit (its SIMDJSON_BUILTIN_IMPLEMENTATION); this
// one names haswell and compiles simdjson and the scanner under a target
// pragma, so the code runs only where RequestScanner chose it: on a CPU
// simdjson's detection found those instructions on (request_scan.cpp).
//
// Every other header is included *before* the pragma: an inline function
// first compiled inside it would be compiled for AVX2, and the linker could
// keep that copy for the whole program. What this file emits under the
// pragma is in the namespaces dpgate::admission::scan_haswell and
// simdjson::haswell, or has internal linkage. The check (docs/BENCHMARKS.md,
// issue 18): no function of this object outside those namespaces contains an
// AVX2 or BMI instruction (objdump -d). tests/unit/admission's
// request_scan_kernels_test compares what this build reads with the baseline.
#include "admission/request_scan_kernel.hpp"

#if DPGATE_HAS_HASWELL_SCAN

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cfloat>
#include <cinttypes>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <ostream>
#include <ranges>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "admission/template/jinja/py_json.hpp"
#include "admission/tokenizer/utf8.hpp"
#include "gateway/api_error.hpp"

#define SIMDJSON_BUILTIN_IMPLEMENTATION haswell
// simdjson forces its On Demand functions inline; a std:: template compiled
// outside the pragma (std::pair's constructor under ondemand::field) cannot
// inline an AVX2 function, so here GCC chooses (simdjson's own switch).
#define simdjson_inline inline
#pragma GCC push_options
#pragma GCC target("avx2,bmi,pclmul,lzcnt")
#include <simdjson.h>

#define DPGATE_SCAN_KERNEL scan_haswell
#define DPGATE_SCAN_KERNEL_NAME "haswell"
#include "admission/request_scan_kernel.ipp"
#pragma GCC pop_options

#endif  // DPGATE_HAS_HASWELL_SCAN
