#include "admission/tokens_cli.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "admission/template/chat_encoder.hpp"
#include "admission/template/chat_request_from_json.hpp"
#include "admission/tokenizer/token_counter.hpp"

namespace dpgate::admission {

namespace {

constexpr const char* kUsage = "usage: dpgate tokens --tokenizer PATH [--template deepseek-v3] [--jsonl]\n";

std::string errorLine(const std::string& message) {
  return nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string countLine(const std::string& line, TokenCounter& counter, const ChatEncoder& encoder) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    return errorLine(std::string("invalid JSON: ") + e.what());
  }
  if (value.is_string()) {
    const TokenCount count = counter.count(value.get_ref<const std::string&>());
    if (!count.ok) return errorLine(count.error);
    return nlohmann::json{{"tokens", count.tokens}}.dump();
  }
  if (value.is_object()) {
    ChatRequest request;
    if (auto error = chatRequestFromJson(value, request)) return errorLine(*error);
    const PromptCount count = encoder.count(request, counter);
    if (!count.ok) return errorLine(count.error);
    return nlohmann::ordered_json{{"prompt_tokens", count.prompt_tokens}, {"images", count.images}}.dump();
  }
  return errorLine("expected a JSON string or a chat completions object");
}

}  // namespace

int runTokensCli(int argc, char** argv) { return runTokensCli(argc, argv, std::cin, std::cout, std::cerr); }

int runTokensCli(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
  std::string tokenizer_path;
  std::string template_name = "deepseek-v3";
  bool jsonl = false;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokenizer" && i + 1 < argc) {
      tokenizer_path = argv[++i];
    } else if (arg == "--template" && i + 1 < argc) {
      template_name = argv[++i];
    } else if (arg == "--jsonl") {
      jsonl = true;
    } else if (arg == "--help" || arg == "-h") {
      out << kUsage;
      return 0;
    } else {
      err << "dpgate tokens: unexpected argument " << arg << "\n" << kUsage;
      return 2;
    }
  }
  if (tokenizer_path.empty()) {
    err << "dpgate tokens: --tokenizer is required\n" << kUsage;
    return 2;
  }
  std::string error;
  const std::unique_ptr<ChatEncoder> encoder = makeChatEncoder(template_name, error);
  if (!encoder) {
    err << "dpgate tokens: " << error << "\n";
    return 2;
  }
  const TokenizerLoad loaded = Tokenizer::load(tokenizer_path);
  if (!loaded.tokenizer) {
    err << "dpgate tokens: " << loaded.error << "\n";
    return 1;
  }
  if (auto mismatch = encoder->checkTokenizer(*loaded.tokenizer)) {
    err << "dpgate tokens: " << *mismatch << "\n";
    return 1;
  }
  TokenCounter counter(loaded.tokenizer);

  if (!jsonl) {
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) {
      err << "dpgate tokens: cannot read stdin\n";
      return 1;
    }
    const TokenCount count = counter.count(text);
    if (!count.ok) {
      err << "dpgate tokens: " << count.error << "\n";
      return 1;
    }
    out << nlohmann::json{{"tokens", count.tokens}}.dump() << "\n";
    return 0;
  }

  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out << (line.empty() ? errorLine("empty line") : countLine(line, counter, *encoder)) << "\n";
  }
  if (in.bad()) {
    err << "dpgate tokens: cannot read stdin\n";
    return 1;
  }
  out.flush();
  return 0;
}

}  // namespace dpgate::admission
