// What a Redis server sends, as dpgate reads it: byte 0 seeds where the
// stream is cut, the rest is the stream. Cut or whole, the reader must give
// the same replies and break at the same reply; no reply passes the bounds;
// a reply of strings, written back as a command, reads back the same.
#include "gateway/redis/resp.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using dpgate::gateway::redis::ReaderLimits;
using dpgate::gateway::redis::Reply;
using dpgate::gateway::redis::ReplyReader;

// Small, so that inputs of a few KiB reach them.
constexpr ReaderLimits kLimits{.max_depth = 3, .max_reply_bytes = 4096};

bool same(const Reply& a, const Reply& b) {
    if (a.kind != b.kind || a.integer != b.integer || a.str != b.str || a.elements.size() != b.elements.size())
        return false;
    for (size_t i = 0; i < a.elements.size(); ++i)
        if (!same(a.elements[i], b.elements[i])) return false;
    return true;
}

// Depth of arrays (an array alone is 1) and the reply's cost as the reader
// counts it.
void measure(const Reply& reply, size_t depth, size_t& deepest, size_t& cost) {
    cost += 64 + reply.str.size();
    if (reply.kind != Reply::Kind::array) return;
    deepest = std::max(deepest, depth);
    for (const Reply& element : reply.elements) measure(element, depth + 1, deepest, cost);
}

struct Read {
    std::vector<Reply> replies;
    bool broken = false;
};

Read readCut(std::string_view stream, uint32_t seed) {
    ReplyReader reader(kLimits);
    Read out;
    size_t at = 0;
    while (at < stream.size()) {
        seed = seed * 1103515245u + 12345u;
        // Mostly small pieces, now and then a large one.
        const size_t piece = (seed >> 16) % 8 == 0 ? 1 + (seed >> 8) % 4096 : 1 + (seed >> 16) % 7;
        reader.feed(stream.substr(at, piece));
        at += piece;
        while (std::optional<Reply> reply = reader.next()) out.replies.push_back(std::move(*reply));
    }
    out.broken = reader.broken();
    return out;
}

Read readWhole(std::string_view stream) {
    ReplyReader reader(kLimits);
    reader.feed(stream);
    Read out;
    while (std::optional<Reply> reply = reader.next()) out.replies.push_back(std::move(*reply));
    out.broken = reader.broken();
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint32_t seed = data[0];
    const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
    const Read whole = readWhole(stream);
    const Read cut = readCut(stream, seed);
    if (whole.broken != cut.broken || whole.replies.size() != cut.replies.size()) std::abort();
    for (size_t i = 0; i < whole.replies.size(); ++i) {
        const Reply& reply = whole.replies[i];
        if (!same(reply, cut.replies[i])) std::abort();
        size_t deepest = 0, cost = 0;
        measure(reply, 1, deepest, cost);
        if (deepest > kLimits.max_depth || cost > kLimits.max_reply_bytes) std::abort();
        (void)dpgate::gateway::redis::describe(reply);
        // An array of strings is a command's shape: written, it reads back.
        if (reply.kind != Reply::Kind::array) continue;
        std::vector<std::string> argv;
        for (const Reply& element : reply.elements)
            if (element.kind == Reply::Kind::string) argv.push_back(element.str);
        ReplyReader back;
        back.feed(dpgate::gateway::redis::formatCommand(argv));
        std::optional<Reply> again = back.next();
        if (!again || again->elements.size() != argv.size()) std::abort();
        for (size_t j = 0; j < argv.size(); ++j)
            if (again->elements[j].kind != Reply::Kind::string || again->elements[j].str != argv[j]) std::abort();
    }
    return 0;
}
