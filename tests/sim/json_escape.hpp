#pragma once

#include <string>
#include <string_view>

namespace dpgate::sim {

// Appends `text` to `out` as the inside of a JSON string literal (no quotes).
// Response bodies are assembled by hand because they are on the hot path of
// the throughput benchmarks; this is the only escaping they need.
inline void appendJsonEscaped(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : text) {
        auto byte = static_cast<unsigned char>(c);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (byte < 0x20) {
                    out += "\\u00";
                    out += kHex[byte >> 4];
                    out += kHex[byte & 0xF];
                } else {
                    out += c;
                }
        }
    }
}

inline std::string jsonQuoted(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    appendJsonEscaped(out, text);
    out += '"';
    return out;
}

}  // namespace dpgate::sim
