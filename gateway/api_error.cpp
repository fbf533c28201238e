#include "gateway/api_error.hpp"

#include <nlohmann/json.hpp>

namespace dpgate::gateway {

std::string ApiError::body() const {
    nlohmann::json error = {{"message", message},
                            {"type", type},
                            {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                            {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
    return nlohmann::json{{"error", std::move(error)}}.dump() + "\n";
}

}  // namespace dpgate::gateway
