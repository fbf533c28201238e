#include "common/api_error.hpp"

namespace dpgate {

namespace {

ApiError make(unsigned status, std::string message, std::string type, std::string code, std::string param = {}) {
    ApiError error;
    error.http_status = status;
    error.message = std::move(message);
    error.type = std::move(type);
    error.code = std::move(code);
    error.param = std::move(param);
    return error;
}

// Length of the valid UTF-8 sequence at text[at], 0 when none starts there
// (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF).
size_t sequenceLength(std::string_view text, size_t at) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(at);
    if (lead < 0x80) return 1;
    size_t length;
    unsigned char low = 0x80, high = 0xBF;  // bounds of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else {
        return 0;
    }
    if (at + length > text.size()) return 0;
    if (byte(at + 1) < low || byte(at + 1) > high) return 0;
    for (size_t i = 2; i < length; ++i)
        if ((byte(at + i) & 0xC0) != 0x80) return 0;
    return length;
}

}  // namespace

ApiError ApiError::badRequest(std::string message, std::string code, std::string param) {
    return make(400, std::move(message), "invalid_request_error", std::move(code), std::move(param));
}
ApiError ApiError::invalidParam(std::string param, std::string message) {
    return make(400, std::move(message), "invalid_request_error", {}, std::move(param));
}
ApiError ApiError::unauthorized(std::string message) {
    return make(401, std::move(message), "invalid_request_error", "invalid_api_key");
}
ApiError ApiError::forbidden(std::string message, std::string code) {
    return make(403, std::move(message), "permission_error", std::move(code));
}
ApiError ApiError::notFound(std::string message, std::string code) {
    return make(404, std::move(message), "invalid_request_error", std::move(code));
}
ApiError ApiError::methodNotAllowed(std::string message) {
    return make(405, std::move(message), "invalid_request_error", "method_not_allowed");
}
ApiError ApiError::conflict(std::string message, std::string code) {
    return make(409, std::move(message), "invalid_request_error", std::move(code));
}
ApiError ApiError::payloadTooLarge(std::string message, std::string code) {
    return make(413, std::move(message), "invalid_request_error", std::move(code));
}
ApiError ApiError::expectationFailed(std::string message) {
    return make(417, std::move(message), "invalid_request_error", "bad_request");
}
ApiError ApiError::rateLimited(std::string message) {
    return make(429, std::move(message), "rate_limit_error", "rate_limit_exceeded");
}
ApiError ApiError::headerTooLarge(std::string message) {
    return make(431, std::move(message), "invalid_request_error", "request_header_too_large");
}
ApiError ApiError::internal(std::string message) {
    return make(500, std::move(message), "server_error", "internal_error");
}
ApiError ApiError::badGateway(std::string message, std::string code) {
    return make(502, std::move(message), "upstream_error", std::move(code));
}
ApiError ApiError::unavailable(std::string message, std::string code, std::string type) {
    return make(503, std::move(message), std::move(type), std::move(code));
}
ApiError ApiError::gatewayTimeout(std::string message, std::string code) {
    return make(504, std::move(message), "upstream_error", std::move(code));
}

std::string_view clipUtf8(std::string_view text, size_t max_bytes) noexcept {
    if (text.size() <= max_bytes) return text;
    size_t cut = max_bytes;
    // Back off continuation bytes: the cut lands before the sequence they belong to.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return text.substr(0, cut);
}

void appendJsonString(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    out.push_back('"');
    size_t i = 0;
    while (i < text.size()) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c >= 0x80) {
            const size_t length = sequenceLength(text, i);
            if (length == 0) {
                out.append("\xEF\xBF\xBD");  // U+FFFD
                ++i;
            } else {
                out.append(text.substr(i, length));
                i += length;
            }
            continue;
        }
        switch (c) {
            case '"': out.append("\\\""); break;
            case '\\': out.append("\\\\"); break;
            case '\b': out.append("\\b"); break;
            case '\f': out.append("\\f"); break;
            case '\n': out.append("\\n"); break;
            case '\r': out.append("\\r"); break;
            case '\t': out.append("\\t"); break;
            default:
                if (c < 0x20) {
                    out.append("\\u00");
                    out.push_back(kHex[c >> 4]);
                    out.push_back(kHex[c & 0xF]);
                } else {
                    out.push_back(char(c));
                }
        }
        ++i;
    }
    out.push_back('"');
}

std::string ApiError::json() const noexcept {
    // Keys in the order clients have always seen them (sorted). Allocation
    // failure is the one way this could fail; it ends the process, as it
    // would anywhere else.
    std::string out;
    out.reserve(64 + message.size() + type.size() + param.size() + code.size());
    const auto nullable = [&out](const std::string& text) {
        if (text.empty()) out.append("null");
        else appendJsonString(out, text);
    };
    out.append(R"({"error":{"code":)");
    nullable(code);
    out.append(R"(,"message":)");
    appendJsonString(out, message);
    out.append(R"(,"param":)");
    nullable(param);
    out.append(R"(,"type":)");
    appendJsonString(out, type);
    out.append("}}");
    return out;
}

std::string ApiError::body() const noexcept { return json() + "\n"; }

}  // namespace dpgate
