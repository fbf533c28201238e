// The one error a client is told, in OpenAI's shape:
// {"error":{"code":...,"message":...,"param":...,"type":...}}
//
// Admission's refusals (admission::Refused), the gateway's own answers and
// the admin API all build it through the named constructors below, and
// render it through body(), which cannot throw: a message quoting client
// bytes that are not UTF-8 gets U+FFFD in their place. Texts taken from a
// request are cut with clipUtf8(), never mid-character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dpgate {

struct ApiError {
    unsigned http_status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // empty -> null
    std::string code;   // empty -> null

    // 400: the request cannot be served as sent.
    static ApiError badRequest(std::string message, std::string code = "bad_request", std::string param = {});
    // 400 naming the offending field, code null (OpenAI's invalid-parameter shape).
    static ApiError invalidParam(std::string param, std::string message);
    static ApiError unauthorized(std::string message);  // 401 invalid_api_key
    // 403: the key is right but may not do this (OpenAI's type for it is not
    // public; Anthropic's and others' word is permission_error).
    static ApiError forbidden(std::string message, std::string code);
    static ApiError notFound(std::string message, std::string code = "not_found");
    static ApiError methodNotAllowed(std::string message);
    static ApiError conflict(std::string message, std::string code);
    static ApiError payloadTooLarge(std::string message, std::string code = "request_too_large");
    static ApiError expectationFailed(std::string message);
    static ApiError rateLimited(std::string message);     // 429 rate_limit_exceeded
    static ApiError headerTooLarge(std::string message);  // 431
    static ApiError internal(std::string message);        // 500 internal_error
    static ApiError badGateway(std::string message, std::string code);
    static ApiError unavailable(std::string message, std::string code, std::string type = "upstream_error");
    static ApiError gatewayTimeout(std::string message, std::string code);

    // The JSON object without a trailing newline, and the HTTP body (with one).
    std::string json() const noexcept;
    std::string body() const noexcept;
};

// The longest prefix of `text` of at most `max_bytes` that does not end
// inside a UTF-8 sequence (what follows the cut is dropped, not garbled).
std::string_view clipUtf8(std::string_view text, std::size_t max_bytes) noexcept;

// Appends `text` as a JSON string literal: quotes, escapes, and U+FFFD for
// every byte that does not start a valid UTF-8 sequence.
void appendJsonString(std::string& out, std::string_view text);

}  // namespace dpgate
