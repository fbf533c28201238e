// Feeds arbitrary bytes to the usage parsers. The first input bytes pick a
// chunking and an event cap; the rest is the upstream stream (or body). The
// contract: no crash, no exception, and the result does not depend on where
// the relay's reads happened to cut the stream.
#include "gateway/stream_usage.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

using dpgate::gateway::SseUsageParser;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    uint32_t seed = data[0] * 2654435761u + 1;
    // Small caps exercise the oversized-event pass-through.
    const size_t cap = (data[1] & 1) ? 64 + data[1] : SseUsageParser::kDefaultMaxEventBytes;
    const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

    (void)dpgate::gateway::parseUsageJson(input);
    (void)dpgate::gateway::isUsageOnlyChunk(input);
    (void)dpgate::gateway::sseEventData(input);

    // Reference: the whole stream in one feed.
    SseUsageParser whole(cap);
    std::string whole_forward;
    whole.filter(input, whole_forward);
    whole.finish(&whole_forward);

    SseUsageParser chunked(cap);
    SseUsageParser observer(cap);
    std::string forward;
    size_t pos = 0;
    while (pos < input.size()) {
        seed = seed * 1103515245u + 12345u;
        const size_t len = 1 + (seed >> 16) % 97;
        const std::string_view piece = input.substr(pos, len);
        chunked.filter(piece, forward);
        observer.observe(piece);
        if (chunked.heldBytes() > cap + 1 || observer.heldBytes() > cap + 1) __builtin_trap();
        pos += piece.size();
    }
    chunked.finish(&forward);
    observer.finish();

    if (forward != whole_forward) __builtin_trap();
    if (chunked.usage() != whole.usage() || observer.usage() != whole.usage()) __builtin_trap();
    if (chunked.droppedEvents() != whole.droppedEvents()) __builtin_trap();
    // Filtering only ever removes whole events.
    if (forward.size() > input.size()) __builtin_trap();
    if (whole.droppedEvents() == 0 && forward != input) __builtin_trap();
    return 0;
}
