#include "admission/admit.hpp"

#include <algorithm>

#include "routing/affinity_key.hpp"

namespace dpgate::admission {

namespace {

Refused invalid(std::string param, std::string message) {
  Refused refused;
  refused.http_status = 400;
  refused.param = std::move(param);
  refused.message = std::move(message);
  return refused;
}

bool servesModel(const AdmissionLimits& limits, std::string_view model) {
  if (model == limits.served_model_id) return true;
  return std::find(limits.model_aliases.begin(), limits.model_aliases.end(), model) != limits.model_aliases.end();
}

bool isSystemRole(std::string_view role) { return role == "system" || role == "developer"; }

// System text before the first user message, then that message: what an
// append-only conversation keeps from its first turn on.
// The conversation head as routing defines it (routing/affinity_key.hpp):
// the leading system/developer messages and the first other message, each
// message's text parts joined. `scratch` keeps the joined texts alive.
std::uint64_t conversationHeadKey(const ChatRequest& chat, std::vector<std::string>& scratch) {
  routing::ConversationView view;
  scratch.clear();
  scratch.reserve(chat.messages.size());
  for (const ChatMessage& message : chat.messages) {
    std::string& text = scratch.emplace_back();
    for (const std::string_view part : message.text_parts) {
      if (!text.empty()) text += '\n';
      text.append(part);
    }
    view.messages.push_back({message.role, text});
    if (!isSystemRole(message.role)) break;
  }
  return routing::conversationHeadKey(view);
}

// Checks one budget field against [1, max]; nullopt when absent or valid.
std::optional<Refused> checkBudget(const char* name, const ScannedInteger& value, std::uint64_t max) {
  if (!value.present) return std::nullopt;
  const bool negative = !value.text.empty() && value.text.front() == '-';
  if (negative || (value.fits_int64 && value.value < 1)) {
    return invalid(name, std::string(name) + ": must be at least 1, got " + std::string(value.text.substr(0, 40)));
  }
  if (!value.fits_int64 || static_cast<std::uint64_t>(value.value) > max) {
    return invalid(name, std::string(name) + ": " + std::string(value.text.substr(0, 40)) +
                             " is above the output limit " + std::to_string(max));
  }
  return std::nullopt;
}

// vLLM's and OpenAI's words for an over-window request, which clients match
// to decide to compact their history (pi-ai's isContextOverflow matches
// "maximum context length is N tokens" and "reduce the length of the
// messages"); the terms follow so nobody has to guess what was counted.
std::string contextLengthMessage(const AdmissionLimits& limits, std::uint64_t needed, std::uint64_t prompt_tokens,
                                 std::uint64_t images, std::uint64_t output_budget, bool chat) {
  std::string message = "This model's maximum context length is " + std::to_string(limits.window_tokens) +
                        " tokens. However, you requested " + std::to_string(needed) + " tokens (" +
                        std::to_string(prompt_tokens) + (chat ? " in the messages, " : " in the prompt, ") +
                        std::to_string(images * limits.image_reserve_tokens) + " for images, " +
                        std::to_string(output_budget) + " in the completion). Please reduce the length of the " +
                        (chat ? "messages" : "prompt") + " or completion.";
  if (images > 0) {
    message += " Each of the " + std::to_string(images) + " images is reserved " +
               std::to_string(limits.image_reserve_tokens) + " tokens.";
  }
  return message;
}

}  // namespace

std::uint64_t promptTokenUpperBound(const Tokenizer& tokenizer, std::string_view text) {
  std::uint64_t bound = 0;
  tokenizer.addedTokens().split(
      text, [&](std::string_view segment) { bound += segment.size(); }, [&](std::uint32_t) { ++bound; });
  return bound;
}

Admitter::Admitter(std::shared_ptr<const Tokenizer> tokenizer, std::string_view template_name)
    : tokenizer_(std::move(tokenizer)) {
  encoder_ = makeChatEncoder(template_name, error_);
  if (encoder_ == nullptr) return;
  if (tokenizer_ == nullptr) {
    error_ = "no tokenizer loaded";
    return;
  }
  if (auto problem = encoder_->checkTokenizer(*tokenizer_)) {
    error_ = std::move(*problem);
    return;
  }
  counter_.emplace(tokenizer_);
}

Verdict Admitter::admit(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                        const AdmissionLimits& limits) {
  // 1. Size.
  if (body.size() > limits.max_body_bytes) {
    Refused refused;
    refused.http_status = 413;
    refused.code = "request_too_large";
    refused.message = "The body is " + std::to_string(body.size()) + " bytes; the limit is " +
                      std::to_string(limits.max_body_bytes) + ".";
    return refused;
  }
  // 2. Shape: JSON, types, roles, UTF-8.
  if (auto error = scanner_.scan(body, capacity_bytes, endpoint, request_)) {
    return invalid(std::move(error->param), std::move(error->message));
  }
  const bool chat = endpoint == Endpoint::chat_completions;
  if (chat) {
    prompt_.clear();
    if (encoder_ == nullptr) {
      Refused refused;
      refused.http_status = 503;
      refused.type = "server_error";
      refused.code = "tokenizer_unavailable";
      refused.message = "Cannot render the chat template: " + error_;
      return refused;
    }
    if (auto error = encoder_->render(request_.chat, prompt_)) {
      const std::size_t colon = error->find(':');
      std::string param = colon == std::string::npos ? "messages" : error->substr(0, colon);
      return invalid(std::move(param), std::move(*error));
    }
  }
  if (!request_.has_model) return invalid("model", "model: missing (this gateway serves " + limits.served_model_id + ")");
  // 3. Model.
  if (!servesModel(limits, request_.model)) {
    Refused refused;
    refused.http_status = 404;
    refused.param = "model";
    refused.code = "model_not_found";
    refused.message = "The model `" + std::string(request_.model.substr(0, 200)) +
                      "` does not exist; this gateway serves " + limits.served_model_id + ".";
    return refused;
  }
  // 4. Images, history included.
  std::uint64_t images = 0;
  for (const ChatMessage& message : request_.chat.messages) images += message.images;
  if (images > limits.max_images) {
    Refused refused;
    refused.param = "messages";
    refused.code = "too_many_images";
    refused.message = std::to_string(images) + " images in this request (history included); the limit is " +
                      std::to_string(limits.max_images) + ".";
    return refused;
  }
  // 5. Output budget. vLLM reads max_completion_tokens first.
  if (auto refused = checkBudget("max_tokens", request_.max_tokens, limits.max_output_tokens)) return *refused;
  if (auto refused = checkBudget("max_completion_tokens", request_.max_completion_tokens, limits.max_output_tokens)) {
    return *refused;
  }
  Admitted admitted;
  admitted.images = static_cast<std::uint32_t>(images);
  admitted.splice_offset = request_.open_brace_offset + 1;
  if (request_.max_completion_tokens.present) {
    admitted.output_budget = static_cast<std::uint64_t>(request_.max_completion_tokens.value);
  } else if (request_.max_tokens.present) {
    admitted.output_budget = static_cast<std::uint64_t>(request_.max_tokens.value);
  } else {
    admitted.output_budget = limits.max_output_tokens;
    admitted.inserted_max_tokens = true;
    admitted.splice_text = "\"max_tokens\":" + std::to_string(limits.max_output_tokens) + ",";
  }
  const std::uint64_t image_tokens = images * limits.image_reserve_tokens;
  const std::uint64_t fixed = image_tokens + admitted.output_budget;
  const bool fixed_fits = fixed <= limits.window_tokens;
  const std::uint64_t room = fixed_fits ? limits.window_tokens - fixed : 0;

  // 6./7. Window: the byte bound first (no tokenizing), then the exact count.
  // Each completions prompt is its own sequence (BOS added, as vLLM does).
  std::vector<std::string_view> texts;
  if (chat) {
    texts.push_back(prompt_);
  } else {
    texts = request_.prompt_texts;
  }
  std::uint64_t bound = 0;
  for (const std::string_view text : texts) {
    const std::uint64_t one = (tokenizer_ != nullptr ? promptTokenUpperBound(*tokenizer_, text) : text.size()) + (chat ? 0 : 1);
    bound = std::max(bound, one);
  }
  for (const std::uint64_t ids : request_.prompt_id_counts) bound = std::max(bound, ids);

  std::uint64_t prompt_tokens = bound;
  admitted.counted = false;
  if (!fixed_fits || bound > room) {
    if (!canCount()) {
      Refused refused;
      refused.http_status = 503;
      refused.type = "server_error";
      refused.code = "tokenizer_unavailable";
      refused.message = "Cannot count this request's tokens: " + error_ + ".";
      return refused;
    }
    prompt_tokens = 0;
    for (const std::string_view text : texts) {
      const TokenCount count = counter_->count(text);
      if (!count.ok) return invalid(chat ? "messages" : "prompt", (chat ? "messages: " : "prompt: ") + count.error);
      prompt_tokens = std::max(prompt_tokens, count.tokens + (chat ? 0 : 1));
    }
    for (const std::uint64_t ids : request_.prompt_id_counts) prompt_tokens = std::max(prompt_tokens, ids);
    admitted.counted = true;
    const std::uint64_t needed = prompt_tokens + fixed;
    if (needed > limits.window_tokens) {
      Refused refused;
      refused.param = chat ? "messages" : "prompt";
      refused.code = "context_length_exceeded";
      refused.message = contextLengthMessage(limits, needed, prompt_tokens, images, admitted.output_budget, chat);
      return refused;
    }
  }
  admitted.prompt_tokens = prompt_tokens;
  admitted.stream = request_.stream;
  admitted.include_usage = request_.include_usage;
  admitted.has_stream_options = request_.has_stream_options;
  admitted.has_prompt_cache_key = request_.has_prompt_cache_key;
  admitted.prompt_cache_key = request_.prompt_cache_key;
  admitted.user = request_.user;
  if (chat) {
    admitted.head_hash = conversationHeadKey(request_.chat, head_scratch_);
  } else if (!request_.prompt_texts.empty()) {
    routing::ConversationView view;
    view.messages.push_back({"prompt", request_.prompt_texts.front()});
    admitted.head_hash = routing::conversationHeadKey(view);
  }
  return admitted;
}

}  // namespace dpgate::admission
