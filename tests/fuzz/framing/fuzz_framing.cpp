// libFuzzer over the request-framing checks: any bytes must give a verdict,
// never a crash; and a verdict must be self-consistent.
#include "gateway/request_framing.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    bool bad = false;
    size_t end = dpgate::gateway::findHeaderEnd(bytes, bad);
    if (end > size || (bad && end != 0)) std::abort();
    std::string_view head = end != 0 ? bytes.substr(0, end) : bytes;
    auto verdict = dpgate::gateway::checkRequestFraming(head, {4096, 16});
    if (verdict.status != 0 && verdict.status != 400 && verdict.status != 431) std::abort();
    if (verdict.status != 0 && verdict.message.empty()) std::abort();
    return 0;
}
