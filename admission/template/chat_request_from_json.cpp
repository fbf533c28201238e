#include "admission/template/chat_request_from_json.hpp"

namespace dpgate::admission {

namespace {

std::string_view viewOf(const nlohmann::json& value) { return value.get_ref<const std::string&>(); }

std::optional<std::string> readContent(const nlohmann::json& content, const std::string& where, ChatMessage& message) {
  if (content.is_null()) return std::nullopt;
  message.content_null = false;
  if (content.is_string()) {
    message.text_parts.push_back(viewOf(content));
    return std::nullopt;
  }
  if (!content.is_array()) return where + ": must be a string, an array of parts or null";
  for (std::size_t i = 0; i < content.size(); ++i) {
    const auto& part = content[i];
    const std::string part_where = where + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return part_where + ": must be an object";
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return part_where + ".type: missing";
    const std::string_view type_name = viewOf(*type);
    if (type_name == "text") {
      const auto text = part.find("text");
      if (text == part.end() || !text->is_string()) return part_where + ".text: must be a string";
      message.text_parts.push_back(viewOf(*text));
    } else if (type_name == "image_url" || type_name == "input_image") {
      ++message.images;
    } else {
      return part_where + ".type: unsupported content part \"" + std::string(type_name) + "\"";
    }
  }
  return std::nullopt;
}

std::optional<std::string> readToolCalls(const nlohmann::json& calls, const std::string& where, ChatMessage& message) {
  if (calls.is_null()) return std::nullopt;
  if (!calls.is_array()) return where + ": must be an array";
  message.has_tool_calls = true;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const auto& call = calls[i];
    const std::string call_where = where + "[" + std::to_string(i) + "]";
    if (!call.is_object()) return call_where + ": must be an object";
    ChatToolCall out;
    if (const auto id = call.find("id"); id != call.end() && id->is_string()) out.id = viewOf(*id);
    const auto type = call.find("type");
    if (type == call.end() || !type->is_string()) return call_where + ".type: must be a string";
    out.type = viewOf(*type);
    const auto function = call.find("function");
    if (function == call.end() || !function->is_object()) return call_where + ".function: must be an object";
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string()) return call_where + ".function.name: must be a string";
    out.name = viewOf(*name);
    const auto arguments = function->find("arguments");
    if (arguments == function->end() || !arguments->is_string()) {
      return call_where + ".function.arguments: must be a string";
    }
    out.arguments = viewOf(*arguments);
    message.tool_calls.push_back(out);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> chatRequestFromJson(const nlohmann::json& body, ChatRequest& request) {
  if (!body.is_object()) return "body: must be a JSON object";
  const auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return "messages: must be an array";
  request.messages.clear();
  request.messages.reserve(messages->size());
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const auto& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return where + ": must be an object";
    ChatMessage message;
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return where + ".role: must be a string";
    message.role = viewOf(*role);
    if (const auto content = m.find("content"); content != m.end()) {
      if (auto error = readContent(*content, where + ".content", message)) return error;
    }
    if (const auto calls = m.find("tool_calls"); calls != m.end()) {
      if (auto error = readToolCalls(*calls, where + ".tool_calls", message)) return error;
    }
    if (const auto id = m.find("tool_call_id"); id != m.end() && id->is_string()) message.tool_call_id = viewOf(*id);
    request.messages.push_back(std::move(message));
  }
  return std::nullopt;
}

}  // namespace dpgate::admission
