#include "admission/template/deepseek_v3_encoder.hpp"

#include <array>

namespace dpgate::admission {

namespace {

constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr std::string_view kOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr std::string_view kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kOutputEnd = "<｜tool▁output▁end｜>";

constexpr std::array kSpecialTokens = {kBos, kEos, kUser, kAssistant, kCallsBegin, kCallsEnd, kCallBegin,
                                       kCallEnd, kSep, kOutputsBegin, kOutputsEnd, kOutputBegin, kOutputEnd};

bool isSystem(std::string_view role) { return role == "system" || role == "developer"; }

void appendContent(const ChatMessage& message, std::string& out) {
  for (std::size_t i = 0; i < message.text_parts.size(); ++i) {
    if (i > 0) out += '\n';
    out += message.text_parts[i];
  }
}

std::string where(std::size_t index) { return "messages[" + std::to_string(index) + "]"; }

void appendCall(const ChatToolCall& call, std::string& out) {
  out += call.type;
  out += kSep;
  out += call.name;
  out += "\n```json\n";
  out += call.arguments;
  out += "\n```";
  out += kCallEnd;
}

}  // namespace

std::optional<std::string> DeepSeekV3Encoder::checkTokenizer(const Tokenizer& tokenizer) const {
  for (const std::string_view token : kSpecialTokens) {
    if (tokenizer.addedTokens().idOf(token) < 0) {
      return "template deepseek-v3 needs added token " + std::string(token) + ", absent from the tokenizer";
    }
  }
  return std::nullopt;
}

std::optional<std::string> DeepSeekV3Encoder::render(const ChatRequest& request, std::string& out) const {
  const auto& messages = request.messages;
  // The template concatenates content with "+": null content is an error for
  // every role except an assistant carrying tool_calls.
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool known = isSystem(m.role) || m.role == "user" || m.role == "assistant" || m.role == "tool";
    if (!known) return where(i) + ".role: unknown role \"" + std::string(m.role) + "\"";
    if (m.content_null && m.role != "assistant") return where(i) + ".content: must not be null for role " + std::string(m.role);
    if (m.content_null && !m.has_tool_calls) return where(i) + ": assistant message needs content or tool_calls";
  }

  out += kBos;
  bool first_system = true;
  for (const ChatMessage& m : messages) {
    if (!isSystem(m.role)) continue;
    if (!first_system) out += "\n\n";
    first_system = false;
    appendContent(m, out);
  }

  bool is_first = false;  // a tool call has been rendered (never reset)
  bool is_tool = false;   // inside a group of tool outputs
  bool is_output_first = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      is_tool = false;
      out += kUser;
      appendContent(m, out);
    } else if (m.role == "assistant" && m.content_null) {
      is_tool = false;
      for (const ChatToolCall& call : m.tool_calls) {
        if (!is_first) {
          out += kAssistant;
          out += kCallsBegin;
          out += kCallBegin;
          appendCall(call, out);
          is_first = true;
        } else {
          out += '\n';
          out += kCallBegin;
          appendCall(call, out);
          out += kCallsEnd;
          out += kEos;
        }
      }
    } else if (m.role == "assistant") {
      out += is_tool ? kOutputsEnd : kAssistant;
      is_tool = false;
      appendContent(m, out);
      out += kEos;
    } else if (m.role == "tool") {
      is_tool = true;
      if (is_output_first) {
        out += kOutputsBegin;
        is_output_first = false;
      } else {
        out += '\n';
      }
      out += kOutputBegin;
      appendContent(m, out);
      out += kOutputEnd;
    }
  }
  if (is_tool) {
    out += kOutputsEnd;
  } else {
    out += kAssistant;  // add_generation_prompt
  }
  return std::nullopt;
}

}  // namespace dpgate::admission
