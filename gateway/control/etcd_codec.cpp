#include "gateway/control/etcd_codec.hpp"

namespace dpgate::gateway::control {

namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string base64Encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
        for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
    }
    if (i < bytes.size()) {
        uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
        if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::optional<std::string> base64Decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        uint32_t v = 0;
        int pads = 0;
        for (size_t j = 0; j < 4; ++j) {
            char c = text[i + j];
            uint32_t digit = 0;
            if (c == '=') {
                // Only at the end, at most two, and never followed by a digit.
                if (i + 4 != text.size() || j < 2) return std::nullopt;
                ++pads;
            } else {
                size_t at = kAlphabet.find(c);
                if (at == std::string_view::npos || pads) return std::nullopt;
                digit = uint32_t(at);
            }
            v = v << 6 | digit;
        }
        out += char(v >> 16);
        if (pads < 2) out += char((v >> 8) & 0xff);
        if (pads < 1) out += char(v & 0xff);
    }
    return out;
}

std::string prefixEnd(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty()) {
        if (uint8_t(end.back()) < 0xff) {
            end.back() = char(uint8_t(end.back()) + 1);
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');  // every key
}

int64_t readInt64(const nlohmann::json& object, const char* key) {
    if (!object.is_object()) return 0;
    auto it = object.find(key);
    if (it == object.end()) return 0;
    if (it->is_number_integer()) return it->get<int64_t>();
    if (!it->is_string()) return 0;
    const std::string& text = it->get_ref<const std::string&>();
    int64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9' || value > (INT64_MAX - 9) / 10) return 0;
        value = value * 10 + (c - '0');
    }
    return value;
}

std::optional<Kv> readKv(const nlohmann::json& kv) {
    if (!kv.is_object()) return std::nullopt;
    Kv out;
    auto key = kv.find("key");
    if (key == kv.end() || !key->is_string()) return std::nullopt;
    std::optional<std::string> decoded = base64Decode(key->get_ref<const std::string&>());
    if (!decoded) return std::nullopt;
    out.key = std::move(*decoded);
    // An empty value is left out of the JSON (proto3 defaults).
    if (auto value = kv.find("value"); value != kv.end()) {
        if (!value->is_string()) return std::nullopt;
        std::optional<std::string> v = base64Decode(value->get_ref<const std::string&>());
        if (!v) return std::nullopt;
        out.value = std::move(*v);
    }
    out.mod_revision = readInt64(kv, "mod_revision");
    out.create_revision = readInt64(kv, "create_revision");
    out.lease = readInt64(kv, "lease");
    return out;
}

}  // namespace dpgate::gateway::control
