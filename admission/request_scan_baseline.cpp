// The request scanner for the kernel the compiler flags give: the portable
// fallback on baseline x86-64 (simdjson's SIMDJSON_BUILTIN_IMPLEMENTATION).
#include "admission/request_scan_kernel.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "admission/template/jinja/py_json.hpp"
#include "admission/tokenizer/utf8.hpp"
#include "gateway/api_error.hpp"

#define DPGATE_SCAN_KERNEL_STR_(x) #x
#define DPGATE_SCAN_KERNEL_STR(x) DPGATE_SCAN_KERNEL_STR_(x)
#define DPGATE_SCAN_KERNEL scan_baseline
#define DPGATE_SCAN_KERNEL_NAME DPGATE_SCAN_KERNEL_STR(SIMDJSON_BUILTIN_IMPLEMENTATION)
#include "admission/request_scan_kernel.ipp"
