// Feeds arbitrary bytes to the usage parsers. The first input bytes pick a
// chunking and an event cap; the rest is the upstream stream (or body). The
// contract: no crash, no exception, and the result does not depend on where
// the relay's reads happened to cut the stream.
#include "gateway/usage/stream_usage.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

using dpgate::gateway::SseUsageParser;

namespace {

// How deep a valid JSON text nests (strings skipped).
size_t nesting(std::string_view json) {
    size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < json.size(); ++i) {
        const char c = json[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            deepest = std::max(deepest, ++depth);
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    uint32_t seed = data[0] * 2654435761u + 1;
    // Small caps exercise the oversized-event pass-through.
    const size_t cap = (data[1] & 1) ? 64 + data[1] : SseUsageParser::kDefaultMaxEventBytes;
    const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

    // The answer's usage read from its end gives what a read of the whole
    // document gives, for any valid JSON simdjson can nest (its limit: 1024)
    // and without a byte order mark (which nlohmann skips, simdjson refuses)
    // or a NUL byte (where nlohmann's accept stops reading).
    // Both judged against the same bound (small ones catch counts over it),
    // and both say alike whether they ignored an implausible usage.
    using dpgate::gateway::UsageCheck;
    const uint64_t max_tokens = (data[1] & 2) ? UINT64_MAX : uint64_t(seed % 4096);
    bool tail_implausible = false, whole_implausible = false, end_implausible = false;
    const auto from_tail =
        dpgate::gateway::parseUsageJson(input, UsageCheck{.max_tokens = max_tokens, .implausible = &tail_implausible});
    // What is not flagged is within the bound.
    if (from_tail && !tail_implausible &&
        (from_tail->prompt_tokens > max_tokens || from_tail->completion_tokens > max_tokens ||
         from_tail->cached_prompt_tokens > from_tail->prompt_tokens))
        __builtin_trap();
    if (!input.starts_with("\xEF\xBB\xBF") && input.find('\0') == std::string_view::npos &&
        nlohmann::json::accept(input) && nesting(input) < 1000) {
        const auto whole = dpgate::gateway::readWholeUsage(
            input, UsageCheck{.max_tokens = max_tokens, .implausible = &whole_implausible});
        if (from_tail != whole || tail_implausible != whole_implausible) __builtin_trap();
        // Any end of it the relay may keep reads that usage or none.
        const auto from_end =
            dpgate::gateway::parseUsageJsonEnd(input.substr(seed % (input.size() + 1)),
                                               UsageCheck{.max_tokens = max_tokens, .implausible = &end_implausible});
        if (from_end && from_end != from_tail) __builtin_trap();
        if (end_implausible && !tail_implausible) __builtin_trap();
    }
    (void)dpgate::gateway::parseUsageJsonEnd(input.substr(input.size() / 2));
    (void)dpgate::gateway::isUsageOnlyChunk(input);
    (void)dpgate::gateway::sseEventData(input);

    // Reference: the whole stream in one feed.
    SseUsageParser whole(cap, max_tokens);
    std::string whole_forward;
    whole.filter(input, whole_forward);
    whole.finish(&whole_forward);

    SseUsageParser chunked(cap, max_tokens);
    SseUsageParser observer(cap, max_tokens);
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
    if (chunked.implausibleUsage() != whole.implausibleUsage() ||
        observer.implausibleUsage() != whole.implausibleUsage())
        __builtin_trap();
    if (whole.usage() && !whole.implausibleUsage() &&
        (whole.usage()->prompt_tokens > max_tokens || whole.usage()->completion_tokens > max_tokens ||
         whole.usage()->cached_prompt_tokens > whole.usage()->prompt_tokens))
        __builtin_trap();
    if (chunked.droppedEvents() != whole.droppedEvents()) __builtin_trap();
    // Filtering only ever removes whole events.
    if (forward.size() > input.size()) __builtin_trap();
    if (whole.droppedEvents() == 0 && forward != input) __builtin_trap();
    return 0;
}
