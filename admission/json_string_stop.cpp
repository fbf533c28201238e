#include "admission/json_string_stop.hpp"

namespace dpgate::admission {

const char* jsonStringStopPlain(const char* p, const char* end) noexcept {
    while (p < end && !isJsonStringStop(*p)) ++p;
    return p;
}

}  // namespace dpgate::admission
