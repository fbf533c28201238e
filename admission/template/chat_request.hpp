#pragma once
// A chat completions request reduced to what a chat template reads. Strings
// are views into storage the caller keeps alive (the parsed JSON document),
// so a 4 MB conversation is never copied to be counted.
#include <cstdint>
#include <string_view>
#include <vector>

namespace dpgate::admission {

struct ChatToolCall {
  std::string_view id;
  std::string_view type;  // "function"
  std::string_view name;
  std::string_view arguments;  // the JSON text as the client sent it
};

struct ChatMessage {
  std::string_view role;  // as sent; encoders decide which roles they know
  // Absent or null content. Distinct from "" (an empty string or an array
  // without text parts), which templates treat differently.
  bool content_null = true;
  // Text of a string content, or the text parts of an array content; a
  // template joins them with "\n" (vLLM's rendering of text-only parts).
  std::vector<std::string_view> text_parts;
  std::uint32_t images = 0;  // image_url / input_image parts
  bool has_tool_calls = false;
  std::vector<ChatToolCall> tool_calls;
  std::string_view tool_call_id;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
};

}  // namespace dpgate::admission
