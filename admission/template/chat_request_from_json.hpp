#pragma once
// Builds a ChatRequest from a parsed chat completions body. The result views
// strings inside `body`, which must outlive it.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "admission/template/chat_request.hpp"

namespace dpgate::admission {

// nullopt on success; otherwise what is wrong, naming the JSON path
// (e.g. "messages[2].content[1].type: unsupported content part \"audio\"").
std::optional<std::string> chatRequestFromJson(const nlohmann::json& body, ChatRequest& request);

}  // namespace dpgate::admission
