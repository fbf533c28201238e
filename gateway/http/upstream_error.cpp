#include "gateway/http/upstream_error.hpp"

#include "common/api_error.hpp"

#include <nlohmann/json.hpp>

namespace dpgate::gateway {

namespace {

std::string stringOr(const nlohmann::json& object, const char* key, std::string fallback) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// Printable ASCII of a non-JSON body, cut short: enough to tell an nginx
// "502 Bad Gateway" page from a Python traceback, never a whole page.
std::string excerpt(std::string_view body) {
    std::string out;
    for (char c : body.substr(0, 200)) out.push_back(c >= 0x20 && c < 0x7f ? c : ' ');
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

}  // namespace

std::string openAiErrorBody(unsigned status, std::string_view body, const std::string& backend, std::string* code) {
    auto answer = [code](const ApiError& shaped) {
        if (code) *code = shaped.code;
        return shaped.body();
    };
    nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
    if (parsed.is_object()) {
        auto error = parsed.find("error");
        if (error != parsed.end() && error->is_object() && error->contains("message")) {
            if (code) *code = stringOr(*error, "code", "");
            return std::string(body);
        }
        if (parsed.contains("message"))
            return answer(ApiError{.http_status = status,
                                   .message = stringOr(parsed, "message", ""),
                                   .type = stringOr(parsed, "type", "upstream_error"),
                                   .param = stringOr(parsed, "param", ""),
                                   .code = stringOr(parsed, "code", "")});
        // FastAPI's {"detail": "..."} for routes it rejects itself.
        if (auto detail = parsed.find("detail"); detail != parsed.end() && detail->is_string())
            return answer(ApiError{.http_status = status,
                                   .message = detail->get<std::string>(),
                                   .type = "upstream_error",
                                   .param = {},
                                   .code = {}});
    }
    std::string text = parsed.is_discarded() ? excerpt(body) : std::string();
    return answer(ApiError{.http_status = status,
                           .message = "backend '" + backend + "' answered " + std::to_string(status) +
                                      (text.empty() ? std::string(".") : ": " + text),
                           .type = "upstream_error",
                           .param = {},
                           .code = "backend_error"});
}

}  // namespace dpgate::gateway
