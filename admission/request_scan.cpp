#include "admission/request_scan.hpp"

#include <simdjson.h>

#include <algorithm>
#include <utility>

#include "admission/tokenizer/utf8.hpp"

namespace dpgate::admission {

namespace od = simdjson::ondemand;

namespace {

// A parser sized for a 128 MB body keeps its (mostly untouched) buffers;
// drop them when much smaller bodies follow.
constexpr std::size_t kShrinkAboveBytes = 32u << 20;

std::string at(const std::string& path, std::size_t index) { return path + "[" + std::to_string(index) + "]"; }

ScanError fail(std::string path, std::string_view what) {
  ScanError error;
  error.message = path + ": " + std::string(what);
  error.param = std::move(path);
  return error;
}

ScanError jsonError(std::string path, simdjson::error_code code) {
  switch (code) {
    case simdjson::STRING_ERROR:
      return fail(std::move(path), "invalid string (a lone surrogate or a bad escape)");
    case simdjson::DEPTH_ERROR:
      return fail(std::move(path), "JSON nested too deeply");
    case simdjson::UNESCAPED_CHARS:
      return fail(std::move(path), "invalid string (unescaped control character)");
    case simdjson::UNCLOSED_STRING:
      return fail(std::move(path), "malformed JSON (unclosed string)");
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
    case simdjson::TAPE_ERROR:
      return fail(std::move(path), "malformed JSON (truncated, unbalanced or trailing content)");
    default:
      return fail(std::move(path), std::string("malformed JSON (") + simdjson::error_message(code) + ")");
  }
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

std::optional<ScanError> typeOf(od::value& value, const std::string& path, od::json_type& type) {
  if (auto error = value.type().get(type)) return jsonError(path, error);
  return std::nullopt;
}

std::optional<ScanError> readString(od::value& value, const std::string& path, std::string_view& out) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type != od::json_type::string) return fail(path, "must be a string");
  if (auto error = value.get_string().get(out)) return jsonError(path, error);
  return std::nullopt;
}

// Null leaves `out` untouched and sets `present` false.
std::optional<ScanError> readOptionalString(od::value& value, const std::string& path, std::string_view& out,
                                            bool& present) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  present = type != od::json_type::null;
  if (!present) return std::nullopt;
  return readString(value, path, out);
}

std::optional<ScanError> readOptionalBool(od::value& value, const std::string& path, bool& out) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type == od::json_type::null) return std::nullopt;
  if (type != od::json_type::boolean) return fail(path, "must be a boolean");
  if (auto error = value.get_bool().get(out)) return jsonError(path, error);
  return std::nullopt;
}

bool isIntegerText(std::string_view text) {
  if (!text.empty() && text.front() == '-') text.remove_prefix(1);
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Integers only: 100.0, 1e3, "100", true and null are refused by name.
std::optional<ScanError> readInteger(od::value& value, const std::string& path, ScannedInteger& out) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type != od::json_type::number) return fail(path, "must be an integer");
  out.text = trimmed(value.raw_json_token());
  out.present = true;
  std::int64_t parsed = 0;
  const auto error = value.get_int64().get(parsed);
  if (!error) {
    out.value = parsed;
    return std::nullopt;
  }
  // 2^64 and beyond: an integer, just out of every range the rules allow.
  if (isIntegerText(out.text)) {
    out.fits_int64 = false;
    return std::nullopt;
  }
  return fail(path, "must be an integer, not " + std::string(out.text.substr(0, 40)));
}

// An image part's image_url: a string, or an object whose url is a string.
// The URL (often megabytes of base64) is type-checked and skipped, never read.
std::optional<ScanError> checkImageUrl(od::value& value, const std::string& path) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type == od::json_type::string) return std::nullopt;
  if (type != od::json_type::object) return fail(path, "must be an object with a string url");
  od::object object;
  if (auto error = value.get_object().get(object)) return jsonError(path, error);
  bool has_url = false;
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(path, error);
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(path, error);
    if (key != "url") continue;
    od::value url = field.value();
    od::json_type url_type;
    if (auto error = typeOf(url, path + ".url", url_type)) return error;
    if (url_type != od::json_type::string) return fail(path + ".url", "must be a string");
    has_url = true;
  }
  if (!has_url) return fail(path + ".url", "missing (an image part needs image_url.url)");
  return std::nullopt;
}

std::optional<ScanError> readContentPart(od::value& value, const std::string& path, ChatMessage& message) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type != od::json_type::object) return fail(path, "must be an object");
  od::object object;
  if (auto error = value.get_object().get(object)) return jsonError(path, error);
  std::string_view part_type;
  bool has_type = false;
  std::string_view text;
  bool has_text = false;
  bool has_image_url = false;
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(path, error);
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(path, error);
    od::value field_value = field.value();
    if (key == "type") {
      if (auto error = readString(field_value, path + ".type", part_type)) return error;
      has_type = true;
    } else if (key == "text") {
      od::json_type text_type;
      if (auto error = typeOf(field_value, path + ".text", text_type)) return error;
      if (text_type == od::json_type::string) {
        if (auto error = field_value.get_string().get(text)) return jsonError(path + ".text", error);
        has_text = true;
      }
    } else if (key == "image_url") {
      if (auto error = checkImageUrl(field_value, path + ".image_url")) return error;
      has_image_url = true;
    }
  }
  if (!has_type) return fail(path + ".type", "missing");
  if (part_type == "text") {
    if (!has_text) return fail(path + ".text", "must be a string");
    message.text_parts.push_back(text);
  } else if (part_type == "image_url" || part_type == "input_image") {
    if (!has_image_url) return fail(path + ".image_url", "missing (an image part needs image_url.url)");
    ++message.images;
  } else {
    return fail(path + ".type", "unsupported content part \"" + std::string(part_type.substr(0, 40)) + "\"");
  }
  return std::nullopt;
}

std::optional<ScanError> readContent(od::value& value, const std::string& path, ChatMessage& message) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type == od::json_type::null) return std::nullopt;
  message.content_null = false;
  if (type == od::json_type::string) {
    std::string_view text;
    if (auto error = value.get_string().get(text)) return jsonError(path, error);
    message.text_parts.push_back(text);
    return std::nullopt;
  }
  if (type != od::json_type::array) return fail(path, "must be a string, an array of parts or null");
  od::array array;
  if (auto error = value.get_array().get(array)) return jsonError(path, error);
  std::size_t index = 0;
  for (auto element_result : array) {
    od::value element;
    if (auto error = std::move(element_result).get(element)) return jsonError(at(path, index), error);
    if (auto error = readContentPart(element, at(path, index), message)) return error;
    ++index;
  }
  return std::nullopt;
}

std::optional<ScanError> readFunction(od::value& value, const std::string& path, ChatToolCall& call) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type != od::json_type::object) return fail(path, "must be an object");
  od::object object;
  if (auto error = value.get_object().get(object)) return jsonError(path, error);
  bool has_name = false;
  bool has_arguments = false;
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(path, error);
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(path, error);
    od::value field_value = field.value();
    if (key == "name") {
      if (auto error = readString(field_value, path + ".name", call.name)) return error;
      has_name = true;
    } else if (key == "arguments") {
      if (auto error = readString(field_value, path + ".arguments", call.arguments)) return error;
      has_arguments = true;
    }
  }
  if (!has_name) return fail(path + ".name", "must be a string");
  if (!has_arguments) return fail(path + ".arguments", "must be a string");
  return std::nullopt;
}

std::optional<ScanError> readToolCall(od::value& value, const std::string& path, ChatToolCall& call) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type != od::json_type::object) return fail(path, "must be an object");
  od::object object;
  if (auto error = value.get_object().get(object)) return jsonError(path, error);
  bool has_type = false;
  bool has_function = false;
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(path, error);
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(path, error);
    od::value field_value = field.value();
    if (key == "id") {
      bool present = false;
      if (auto error = readOptionalString(field_value, path + ".id", call.id, present)) return error;
    } else if (key == "type") {
      if (auto error = readString(field_value, path + ".type", call.type)) return error;
      has_type = true;
    } else if (key == "function") {
      if (auto error = readFunction(field_value, path + ".function", call)) return error;
      has_function = true;
    }
  }
  if (!has_type) return fail(path + ".type", "must be a string");
  if (!has_function) return fail(path + ".function", "missing (a tool call needs function.name and function.arguments)");
  return std::nullopt;
}

std::optional<ScanError> readToolCalls(od::value& value, const std::string& path, ChatMessage& message) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type == od::json_type::null) return std::nullopt;
  if (type != od::json_type::array) return fail(path, "must be an array");
  message.has_tool_calls = true;
  od::array array;
  if (auto error = value.get_array().get(array)) return jsonError(path, error);
  std::size_t index = 0;
  for (auto element_result : array) {
    od::value element;
    if (auto error = std::move(element_result).get(element)) return jsonError(at(path, index), error);
    ChatToolCall call;
    if (auto error = readToolCall(element, at(path, index), call)) return error;
    message.tool_calls.push_back(call);
    ++index;
  }
  return std::nullopt;
}

std::optional<ScanError> readMessage(od::value& value, const std::string& path, ChatMessage& message) {
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type != od::json_type::object) return fail(path, "must be an object");
  od::object object;
  if (auto error = value.get_object().get(object)) return jsonError(path, error);
  bool has_role = false;
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(path, error);
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(path, error);
    od::value field_value = field.value();
    if (key == "role") {
      if (auto error = readString(field_value, path + ".role", message.role)) return error;
      has_role = true;
    } else if (key == "content") {
      if (auto error = readContent(field_value, path + ".content", message)) return error;
    } else if (key == "tool_calls") {
      if (auto error = readToolCalls(field_value, path + ".tool_calls", message)) return error;
    } else if (key == "tool_call_id") {
      bool present = false;
      if (auto error = readOptionalString(field_value, path + ".tool_call_id", message.tool_call_id, present)) {
        return error;
      }
    }
  }
  if (!has_role) return fail(path + ".role", "missing");
  return std::nullopt;
}

std::optional<ScanError> readMessages(od::value& value, ChatRequest& chat) {
  const std::string path = "messages";
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type != od::json_type::array) return fail(path, "must be an array");
  od::array array;
  if (auto error = value.get_array().get(array)) return jsonError(path, error);
  std::size_t index = 0;
  for (auto element_result : array) {
    od::value element;
    if (auto error = std::move(element_result).get(element)) return jsonError(at(path, index), error);
    chat.messages.emplace_back();
    if (auto error = readMessage(element, at(path, index), chat.messages.back())) return error;
    ++index;
  }
  if (index == 0) return fail(path, "must contain at least one message");
  return std::nullopt;
}

std::optional<ScanError> readTokenIds(od::value& value, const std::string& path, std::uint64_t& count) {
  od::array array;
  if (auto error = value.get_array().get(array)) return jsonError(path, error);
  std::size_t index = 0;
  for (auto element_result : array) {
    od::value element;
    if (auto error = std::move(element_result).get(element)) return jsonError(at(path, index), error);
    std::uint64_t id = 0;
    od::json_type type;
    if (auto error = typeOf(element, at(path, index), type)) return error;
    if (type != od::json_type::number || element.get_uint64().get(id) != simdjson::SUCCESS || id > 0xffffffffu) {
      return fail(at(path, index), "must be a token id (a non-negative integer)");
    }
    ++index;
  }
  if (index == 0) return fail(path, "must not be empty");
  count = index;
  return std::nullopt;
}

// `prompt`: a string, an array of strings, an array of token ids, or an
// array of arrays of token ids; each string or id array is one sequence.
std::optional<ScanError> readPrompt(od::value& value, ScannedRequest& out) {
  const std::string path = "prompt";
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type == od::json_type::string) {
    out.prompt_texts.emplace_back();
    return readString(value, path, out.prompt_texts.back());
  }
  if (type != od::json_type::array) return fail(path, "must be a string, an array of strings or of token ids");
  od::array array;
  if (auto error = value.get_array().get(array)) return jsonError(path, error);
  std::size_t index = 0;
  od::json_type first_type = od::json_type::null;
  std::uint64_t flat_ids = 0;
  for (auto element_result : array) {
    const std::string element_path = at(path, index);
    od::value element;
    if (auto error = std::move(element_result).get(element)) return jsonError(element_path, error);
    od::json_type element_type;
    if (auto error = typeOf(element, element_path, element_type)) return error;
    if (index == 0) first_type = element_type;
    if (element_type != first_type) return fail(element_path, "must have the type of prompt[0]");
    if (element_type == od::json_type::string) {
      out.prompt_texts.emplace_back();
      if (auto error = readString(element, element_path, out.prompt_texts.back())) return error;
    } else if (element_type == od::json_type::number) {
      std::uint64_t id = 0;
      if (element.get_uint64().get(id) != simdjson::SUCCESS || id > 0xffffffffu) {
        return fail(element_path, "must be a token id (a non-negative integer)");
      }
      ++flat_ids;
    } else if (element_type == od::json_type::array) {
      out.prompt_id_counts.emplace_back();
      if (auto error = readTokenIds(element, element_path, out.prompt_id_counts.back())) return error;
    } else {
      return fail(element_path, "must be a string, a token id or an array of token ids");
    }
    ++index;
  }
  if (index == 0) return fail(path, "must not be empty");
  if (flat_ids > 0) out.prompt_id_counts.push_back(flat_ids);
  return std::nullopt;
}

std::optional<ScanError> readStreamOptions(od::value& value, ScannedRequest& out) {
  const std::string path = "stream_options";
  od::json_type type;
  if (auto error = typeOf(value, path, type)) return error;
  if (type == od::json_type::null) return std::nullopt;
  if (type != od::json_type::object) return fail(path, "must be an object");
  od::object object;
  if (auto error = value.get_object().get(object)) return jsonError(path, error);
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(path, error);
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(path, error);
    if (key != "include_usage") continue;
    od::value field_value = field.value();
    if (auto error = readOptionalBool(field_value, path + ".include_usage", out.include_usage)) return error;
  }
  return std::nullopt;
}

std::optional<ScanError> readN(od::value& value, ScannedRequest& out) {
  od::json_type type;
  if (auto error = typeOf(value, "n", type)) return error;
  if (type == od::json_type::null) return std::nullopt;
  ScannedInteger n;
  if (auto error = readInteger(value, "n", n)) return error;
  if (!n.fits_int64 || n.value < 1) return fail("n", "must be an integer >= 1");
  out.n = static_cast<std::uint64_t>(n.value);
  return std::nullopt;
}

// Fields read at the top level; each may appear once (a second copy would be
// what a Python backend reads, not what was judged).
enum TopField : unsigned {
  kModel = 1u << 0,
  kMessages = 1u << 1,
  kPrompt = 1u << 2,
  kMaxTokens = 1u << 3,
  kMaxCompletionTokens = 1u << 4,
  kStream = 1u << 5,
  kStreamOptions = 1u << 6,
  kPromptCacheKey = 1u << 7,
  kUser = 1u << 8,
  kN = 1u << 9,
};

std::optional<ScanError> scanDocument(od::document& doc, std::string_view body, Endpoint endpoint,
                                      ScannedRequest& out) {
  od::json_type root_type;
  if (auto error = doc.type().get(root_type)) {
    if (error == simdjson::UTF8_ERROR) return fail("body", "is not valid UTF-8 (byte offset " + std::to_string(findInvalidUtf8(body)) + ")");
    return jsonError("body", error);
  }
  if (root_type != od::json_type::object) return fail("body", "must be a JSON object");
  const char* location = nullptr;
  if (doc.current_location().get(location) == simdjson::SUCCESS) {
    out.open_brace_offset = static_cast<std::size_t>(location - body.data());
  }
  od::object root;
  if (auto error = doc.get_object().get(root)) return jsonError("body", error);
  unsigned seen = 0;
  const bool chat = endpoint == Endpoint::chat_completions;
  for (auto field_result : root) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError("body", error);
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError("body", error);
    od::value value = field.value();
    unsigned bit = 0;
    std::optional<ScanError> error;
    if (key == "model") {
      bit = kModel;
      error = readString(value, "model", out.model);
      out.has_model = true;
    } else if (key == "messages" && chat) {
      bit = kMessages;
      error = readMessages(value, out.chat);
    } else if (key == "prompt" && !chat) {
      bit = kPrompt;
      error = readPrompt(value, out);
    } else if (key == "max_tokens") {
      bit = kMaxTokens;
      error = readInteger(value, "max_tokens", out.max_tokens);
    } else if (key == "max_completion_tokens" && chat) {
      bit = kMaxCompletionTokens;
      error = readInteger(value, "max_completion_tokens", out.max_completion_tokens);
    } else if (key == "stream") {
      bit = kStream;
      error = readOptionalBool(value, "stream", out.stream);
    } else if (key == "stream_options") {
      bit = kStreamOptions;
      out.has_stream_options = true;
      error = readStreamOptions(value, out);
    } else if (key == "prompt_cache_key") {
      bit = kPromptCacheKey;
      error = readOptionalString(value, "prompt_cache_key", out.prompt_cache_key, out.has_prompt_cache_key);
    } else if (key == "user") {
      bit = kUser;
      bool present = false;
      error = readOptionalString(value, "user", out.user, present);
    } else if (key == "n") {
      bit = kN;
      error = readN(value, out);
    }
    if (error) return error;
    if (bit != 0) {
      if ((seen & bit) != 0) return fail(std::string(key), "appears twice");
      seen |= bit;
    }
  }
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) == simdjson::SUCCESS) {
    return fail("body", "trailing content after the JSON object (byte offset " +
                            std::to_string(static_cast<std::size_t>(trailing - body.data())) + ")");
  }
  if (chat && (seen & kMessages) == 0) return fail("messages", "missing (a chat completions request needs messages)");
  if (!chat && (seen & kPrompt) == 0) return fail("prompt", "missing (a completions request needs prompt)");
  return std::nullopt;
}

}  // namespace

struct RequestScanner::Impl {
  od::parser parser;
  simdjson::padded_string copy;
};

RequestScanner::RequestScanner() : impl_(std::make_unique<Impl>()) {}
RequestScanner::~RequestScanner() = default;

std::optional<ScanError> RequestScanner::scan(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                                              ScannedRequest& out) {
  out = ScannedRequest{};
  if (impl_->parser.capacity() > kShrinkAboveBytes && impl_->parser.capacity() > 4 * body.size()) {
    impl_->parser = od::parser{};
  }
  impl_->copy = simdjson::padded_string{};
  std::string_view padded = body;
  if (capacity_bytes < body.size() + kScanPaddingBytes) {
    impl_->copy = simdjson::padded_string(body);
    padded = std::string_view(impl_->copy.data(), impl_->copy.size());
  }
  od::document doc;
  if (auto error = impl_->parser.iterate(padded.data(), padded.size(), padded.size() + kScanPaddingBytes).get(doc)) {
    if (error == simdjson::UTF8_ERROR) {
      return fail("body", "is not valid UTF-8 (byte offset " + std::to_string(findInvalidUtf8(body)) + ")");
    }
    if (error == simdjson::EMPTY) return fail("body", "empty (expected a JSON object)");
    return jsonError("body", error);
  }
  return scanDocument(doc, padded, endpoint, out);
}

}  // namespace dpgate::admission
