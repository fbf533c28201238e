// A backend's error answer in the shape OpenAI clients parse:
// {"error":{"message","type","param","code"}}. vLLM answers errors as
// {"object":"error","message":...,"type":...,"param":...,"code":500}, and a
// proxy in between may answer plain text; SDKs then show a bare status with
// no reason. Pure (bytes in, body out), for tests.
#pragma once

#include <string>
#include <string_view>

namespace dpgate::gateway {

// The body to send the client for a backend's error answer of `status`
// from `backend`. An OpenAI-shaped body is returned unchanged; a vLLM-shaped
// one keeps its message, type and param (a numeric code becomes null: OpenAI
// codes are strings); anything else becomes an "upstream_error" naming the
// status, with the first bytes of the text when it is printable.
// `code`, when given, receives the error's code (empty when it is null).
std::string openAiErrorBody(unsigned status, std::string_view body, const std::string& backend,
                            std::string* code = nullptr);

}  // namespace dpgate::gateway
