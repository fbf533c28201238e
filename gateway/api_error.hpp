// The OpenAI error shape every refusal uses:
// {"error":{"message":...,"type":...,"param":...,"code":...}}
#pragma once

#include <string>

namespace dpgate::gateway {

struct ApiError {
    unsigned status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // empty -> null
    std::string code;   // empty -> null

    std::string body() const;  // JSON text, newline-terminated
};

}  // namespace dpgate::gateway
