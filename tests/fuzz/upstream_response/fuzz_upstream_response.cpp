// Any bytes as a backend's answer: the relay's parser must never crash, and
// must say what Beast's response parser says (error or not; status, fields
// and body when not), however the bytes arrive and the body windows are cut.
// The first two input bytes pick the feed size and the window size.
#include "tests/fuzz/upstream_response/two_parsers.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace dpgate::gateway::test;
    if (size < 2) return 0;
    const size_t feed = 1 + data[0] % 64;
    const size_t window = 1 + data[1] % 32;
    const std::string_view wire(reinterpret_cast<const char*>(data) + 2, size - 2);
    if (!sameAnswer(parseAsTheRelay(wire, feed, window), parseWithBeast(wire))) __builtin_trap();
    return 0;
}
