// Feeds arbitrary bytes to json.loads as the template engine reproduces it.
// The first byte picks json.dumps options; the rest is the document. The
// contract: no crash; an accepted document dumps without error, its dump
// loads back, and dumping that again gives the same bytes. Side checks:
// pyJsonNumber agrees with json.loads on a lone number, and repr(float)
// reads back to the same double.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "admission/template/jinja/arena.hpp"
#include "admission/template/jinja/py_float.hpp"
#include "admission/template/jinja/py_json.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace {

using namespace dpgate::admission::jinja;

JsonDumpOptions optionsFrom(std::uint8_t flags) {
    JsonDumpOptions options;
    options.ensure_ascii = (flags & 1) != 0;
    switch ((flags >> 1) & 3) {
        case 1: options.indent = ""; break;
        case 2: options.indent = "  "; break;
        case 3: options.indent = "\t"; break;
        default: break;
    }
    options.sort_keys = (flags & 8) != 0;
    if ((flags & 16) != 0) {
        options.item_separator = ",";
        options.key_separator = ":";
    }
    return options;
}

bool sameNumber(const Value& a, const Value& b) {
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case ValueKind::integer: return a.asInt() == b.asInt();
        case ValueKind::big_integer: return a.text() == b.text();
        case ValueKind::floating: {
            std::uint64_t x = 0;
            std::uint64_t y = 0;
            const double fa = a.asFloat();
            const double fb = b.asFloat();
            std::memcpy(&x, &fa, sizeof x);
            std::memcpy(&y, &fb, sizeof y);
            return x == y;
        }
        default: return false;
    }
}

void checkFloatRepr(const std::uint8_t* bytes) {
    double value = 0;
    std::memcpy(&value, bytes, sizeof value);
    const std::string repr = pyFloatRepr(value);
    if (std::isnan(value)) {
        if (repr != "nan") __builtin_trap();
        return;
    }
    if (std::isinf(value)) {
        if (repr != (value < 0 ? "-inf" : "inf")) __builtin_trap();
        return;
    }
    double back = 0;
    const auto [end, ec] = std::from_chars(repr.data(), repr.data() + repr.size(), back);
    if (ec != std::errc() || end != repr.data() + repr.size()) __builtin_trap();
    if (std::memcmp(&back, &value, sizeof value) != 0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    if (size >= 9) checkFloatRepr(data + 1);
    const JsonDumpOptions options = optionsFrom(data[0]);
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (dpgate::admission::findInvalidUtf8(text) != dpgate::admission::kValidUtf8) return 0;

    Arena arena;
    Value value;
    if (auto error = pyJsonLoads(text, arena, value)) {
        if (error->message.empty()) __builtin_trap();
        return 0;
    }
    std::string first;
    if (pyJsonDumps(value, options, first)) __builtin_trap();  // anything json.loads makes can be dumped
    if (dpgate::admission::findInvalidUtf8(first) != dpgate::admission::kValidUtf8) __builtin_trap();

    Value again;
    if (pyJsonLoads(first, arena, again)) __builtin_trap();
    std::string second;
    if (pyJsonDumps(again, options, second)) __builtin_trap();
    if (first != second) __builtin_trap();

    // A lone number token (not a NaN/Infinity constant) converts the same way alone.
    if (value.kind() == ValueKind::integer || value.kind() == ValueKind::big_integer ||
        value.kind() == ValueKind::floating) {
        const std::size_t begin = text.find_first_not_of(" \t\n\r");
        const std::size_t last = text.find_last_not_of(" \t\n\r");
        const std::string_view token = text.substr(begin, last - begin + 1);
        if (token.find_first_of("NI") == std::string_view::npos && !sameNumber(pyJsonNumber(token, arena), value)) {
            __builtin_trap();
        }
    }
    return 0;
}
