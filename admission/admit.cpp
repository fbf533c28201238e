#include "admission/admit.hpp"

#include <algorithm>
#include <span>

#include "admission/clip_json_path.hpp"
#include "admission/template/vllm_render.hpp"
#include "routing/affinity_key.hpp"

namespace dpgate::admission {

namespace {

Refused invalid(std::string param, std::string message) {
    return ApiError::invalidParam(std::move(param), std::move(message));
}

// What a refusal may quote of a request: a path of at most
// kMaxJsonPathBytes, and a message of at most kMaxMessageBytes (every
// message admission builds is far shorter; a chat template's own words can
// quote request values).
constexpr std::size_t kMaxMessageBytes = 4096;

void boundRefusal(Refused& refused) {
    refused.param = clipJsonPath(std::move(refused.param));
    if (refused.message.size() > kMaxMessageBytes) {
        refused.message.resize(clipUtf8(refused.message, kMaxMessageBytes - 3).size());
        refused.message += "...";
    }
}

bool servesModel(const AdmissionLimits& limits, std::string_view model) {
    if (model == limits.served_model_id) return true;
    return std::find(limits.model_aliases.begin(), limits.model_aliases.end(), model) != limits.model_aliases.end();
}

bool isSystemRole(std::string_view role) { return role == "system" || role == "developer"; }

// The conversation head as routing defines it (routing/affinity_key.hpp):
// the tool definitions, the leading system/developer messages and the first
// other message, each message's text parts joined. A message of one text
// part (string content, the usual case) is viewed where it lies; only parts
// to join are copied, into `scratch`, and `view` holds the views. Both are
// reused from request to request (their capacity stays), so a steady stream
// of requests allocates nothing here.
std::uint64_t conversationHeadKey(const ChatRequest& chat, std::vector<std::string>& scratch,
                                  routing::ConversationView& view) {
    view.messages.clear();
    view.tools = chat.tools_json;
    // Room for every message first: the views taken below must not move
    // with a reallocation (a short text lives inside its std::string).
    scratch.reserve(chat.messages.size());
    size_t used = 0;
    for (const ChatMessage& message : chat.messages) {
        std::string_view text;
        size_t parts = 0;
        message.forEachText([&](std::string_view part) {
            if (parts++ == 0) text = part;
        });
        if (parts > 1) {
            if (used == scratch.size()) scratch.emplace_back();
            std::string& joined = scratch[used++];
            joined.clear();
            bool first = true;
            message.forEachText([&](std::string_view part) {
                if (!first) joined += '\n';
                first = false;
                joined.append(part);
            });
            text = joined;
        }
        view.messages.push_back({message.role, text});
        if (!isSystemRole(message.role)) break;
    }
    const std::uint64_t key = routing::conversationHeadKey(view);
    // A long head's text is not kept past its request.
    constexpr size_t kKeepBytes = 64 * 1024;
    for (size_t i = 0; i < used; ++i)
        if (scratch[i].capacity() > kKeepBytes) std::string().swap(scratch[i]);
    return key;
}

Refused tokenizerUnavailable(std::string message) {
    return ApiError::unavailable(std::move(message), "tokenizer_unavailable", "server_error");
}

// Checks one budget field against [1, max]; nullopt when absent or valid.
std::optional<Refused> checkBudget(const char* name, const ScannedInteger& value, std::uint64_t max) {
    if (!value.present) return std::nullopt;
    const bool negative = !value.text.empty() && value.text.front() == '-';
    if (negative || (value.fits_int64 && value.value < 1)) {
        return invalid(name, std::string(name) + ": must be at least 1, got " + std::string(clipUtf8(value.text, 40)));
    }
    if (!value.fits_int64 || static_cast<std::uint64_t>(value.value) > max) {
        return invalid(name, std::string(name) + ": " + std::string(clipUtf8(value.text, 40)) +
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

Admitter::Admitter(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<const ChatTemplate> chat_template,
                   std::function<std::int64_t()> unix_now, TokenCounterLimits counter_limits)
    : tokenizer_(std::move(tokenizer)), chat_template_(std::move(chat_template)), unix_now_(std::move(unix_now)) {
    if (tokenizer_ == nullptr) {
        error_ = "no tokenizer loaded";
        return;
    }
    if (chat_template_ == nullptr) error_ = "no chat template loaded";
    counter_.emplace(tokenizer_, counter_limits);
}

std::optional<Refused> Admitter::renderPrompt(std::size_t body_bytes) {
    prompt_.clear();
    if (chat_template_ == nullptr) {
        return tokenizerUnavailable("Cannot render the chat template: " +
                                    (error_.empty() ? std::string("no chat template loaded") : error_) + ".");
    }
    PromptRenderOptions options;
    options.now_unix_seconds = unix_now_ ? unix_now_() : 0;
    options.limits = jinja::RenderLimits::forRequest(body_bytes);
    if (quick_) {
        options.limits.output_bytes = std::min(options.limits.output_bytes, quick_->prompt_bytes);
        options.limits.steps = std::min(options.limits.steps, quick_->render_steps);
    }
    options.fast_path = native_rendering_;
    if (auto error = renderChatPrompt(*chat_template_, request_.chat, arena_, prompt_, options, &renderers_)) {
        if (quick_ && error->limit) {
            deferred_ = true;
            return tokenizerUnavailable("deferred");  // not an answer: admitQuickly() returns nullopt
        }
        // The backend would refuse the request with the template's own words.
        return invalid(std::move(error->param), std::move(error->message));
    }
    return std::nullopt;
}

TokenCount Admitter::countPrompt() {
    TokenCount count = counter_->count(prompt_);
    if (!count.ok) return count;
    const ChatRequest& chat = request_.chat;
    if (chat.add_special_tokens) {
        count.tokens += chat_template_->addedBos() ? 1 : 0;
        count.tokens += chat_template_->addedEos() ? 1 : 0;
    }
    return count;
}

Admitter::ChatCount Admitter::countChat(std::string_view body, std::size_t capacity_bytes) {
    ChatCount result;
    arena_.reset();
    if (auto error = scanner_.scan(body, std::max(capacity_bytes, body.size()), Endpoint::chat_completions,
                                   AdmissionLimits{}.max_json_depth, arena_, request_)) {
        result.param = std::move(error->param);
        result.error = std::move(error->message);
        return result;
    }
    for (const ChatMessage& message : request_.chat.messages) result.images += message.images;
    if (!canCount()) {
        result.error = "cannot count: " + error_;
        return result;
    }
    if (auto refused = renderPrompt(body.size())) {
        boundRefusal(*refused);
        result.param = std::move(refused->param);
        result.error = std::move(refused->message);
        return result;
    }
    const TokenCount count = countPrompt();
    if (!count.ok) {
        result.param = "messages";
        result.error = count.error;
        return result;
    }
    result.ok = true;
    result.prompt_tokens = count.tokens;
    if (request_.chat.truncate_prompt_tokens && *request_.chat.truncate_prompt_tokens >= 0) {
        result.prompt_tokens = std::min<std::uint64_t>(
            result.prompt_tokens, static_cast<std::uint64_t>(*request_.chat.truncate_prompt_tokens));
    }
    return result;
}

Verdict Admitter::admit(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                        const AdmissionLimits& limits) {
    Verdict verdict = judge(body, capacity_bytes, endpoint, limits);
    if (auto* refused = std::get_if<Refused>(&verdict)) boundRefusal(*refused);
    return verdict;
}

std::optional<Verdict> Admitter::admitQuickly(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                                              const AdmissionLimits& limits, const QuickBound& bound) {
    quick_ = &bound;
    deferred_ = false;
    Verdict verdict = admit(body, capacity_bytes, endpoint, limits);
    quick_ = nullptr;
    if (deferred_) return std::nullopt;
    return verdict;
}

Verdict Admitter::judge(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                        const AdmissionLimits& limits) {
    // 1. Size.
    if (body.size() > limits.max_body_bytes) {
        return ApiError::payloadTooLarge("The body is " + std::to_string(body.size()) + " bytes; the limit is " +
                                         std::to_string(limits.max_body_bytes) + ".");
    }
    // 2. Shape: JSON, types, roles, UTF-8.
    arena_.reset();
    if (auto error = scanner_.scan(body, capacity_bytes, endpoint, limits.max_json_depth, arena_, request_)) {
        return invalid(std::move(error->param), std::move(error->message));
    }
    const bool chat = endpoint == Endpoint::chat_completions;
    if (!request_.has_model)
        return invalid("model", "model: missing (this gateway serves " + limits.served_model_id + ")");
    // 3. Model.
    if (!servesModel(limits, request_.model)) {
        Refused refused =
            ApiError::notFound("The model `" + std::string(clipUtf8(request_.model, 200)) +
                                   "` does not exist; this gateway serves " + limits.served_model_id + ".",
                               "model_not_found");
        refused.param = "model";
        return refused;
    }
    // 4. Images, history included.
    std::uint64_t images = 0;
    for (const ChatMessage& message : request_.chat.messages) images += message.images;
    if (images > limits.max_images) {
        return ApiError::badRequest(std::to_string(images) +
                                        " images in this request (history included); the limit is " +
                                        std::to_string(limits.max_images) + ".",
                                    "too_many_images", "messages");
    }
    // 5. Output budget. vLLM reads max_completion_tokens first.
    if (auto refused = checkBudget("max_tokens", request_.max_tokens, limits.max_output_tokens)) return *refused;
    if (auto refused = checkBudget("max_completion_tokens", request_.max_completion_tokens, limits.max_output_tokens)) {
        return *refused;
    }
    // Completions asked for at once: each is a sequence of its own (vLLM
    // checks the window per sequence, below), but they all take backend time.
    if (request_.n > limits.max_n) {
        return invalid("n", "n: " + std::string(clipUtf8(request_.n_text, 40)) + " is above the limit " +
                                std::to_string(limits.max_n) + " (limits.max_n)");
    }
    Admitted admitted;
    admitted.images = static_cast<std::uint32_t>(images);
    admitted.n = static_cast<std::uint32_t>(request_.n);
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
    admitted.output_reservation_tokens = admitted.n * admitted.output_budget;
    const std::uint64_t image_tokens = images * limits.image_reserve_tokens;
    const std::uint64_t fixed = image_tokens + admitted.output_budget;
    const bool fixed_fits = fixed <= limits.window_tokens;
    const std::uint64_t room = fixed_fits ? limits.window_tokens - fixed : 0;

    // 6. The prompt as the backend renders it.
    if (chat) {
        if (auto refused = renderPrompt(body.size())) return *refused;
    }
    // 7. Window. Counted exactly whenever dpgate can count, so the backend's
    // usage can verify every count; without a tokenizer only what the byte
    // bound proves to fit passes. Each completions prompt is its own sequence
    // (BOS added, as vLLM does).
    const std::string_view prompt = prompt_;
    const std::span<const std::string_view> texts =
        chat ? std::span<const std::string_view>(&prompt, 1) : std::span<const std::string_view>(request_.prompt_texts);
    std::uint64_t prompt_tokens = 0;
    if (quick_ && counter_) {
        std::size_t text_bytes = 0;
        for (const std::string_view text : texts) text_bytes += text.size();
        if (text_bytes > quick_->prompt_bytes) {
            deferred_ = true;
            return tokenizerUnavailable("deferred");
        }
    }
    if (counter_) {
        for (const std::string_view text : texts) {
            const TokenCount count = chat ? countPrompt() : counter_->count(text);
            if (!count.ok)
                return invalid(chat ? "messages" : "prompt", (chat ? "messages: " : "prompt: ") + count.error);
            prompt_tokens = std::max(prompt_tokens, count.tokens + (chat ? 0 : 1));
        }
        admitted.counted = true;
    } else {
        for (const std::string_view text : texts)
            prompt_tokens = std::max<std::uint64_t>(prompt_tokens, text.size() + (chat ? 0 : 1));
        admitted.counted = false;
        if (!fixed_fits || prompt_tokens > room) {
            return tokenizerUnavailable("Cannot count this request's tokens: " + error_ + ".");
        }
    }
    for (const std::uint64_t ids : request_.prompt_id_counts) prompt_tokens = std::max(prompt_tokens, ids);
    if (chat && request_.chat.truncate_prompt_tokens) {
        // vLLM keeps the last N tokens (-1: as many as the window leaves) and
        // refuses an N the window cannot hold.
        const std::int64_t n = *request_.chat.truncate_prompt_tokens;
        const std::uint64_t input_room =
            limits.window_tokens > admitted.output_budget ? limits.window_tokens - admitted.output_budget : 0;
        if (n >= 0 && static_cast<std::uint64_t>(n) > input_room) {
            return invalid("truncate_prompt_tokens", "truncate_prompt_tokens=" + std::to_string(n) +
                                                         " cannot be greater than max_model_len - max_tokens = " +
                                                         std::to_string(input_room) + ".");
        }
        prompt_tokens = std::min<std::uint64_t>(prompt_tokens, n < 0 ? input_room : static_cast<std::uint64_t>(n));
    }
    const std::uint64_t needed = prompt_tokens + fixed;
    if (needed > limits.window_tokens) {
        return ApiError::badRequest(
            contextLengthMessage(limits, needed, prompt_tokens, images, admitted.output_budget, chat),
            "context_length_exceeded", chat ? "messages" : "prompt");
    }
    admitted.prompt_tokens = prompt_tokens;
    const std::size_t sequences = chat ? 1 : request_.prompt_texts.size() + request_.prompt_id_counts.size();
    if (admitted.counted && images == 0 && sequences == 1) admitted.expected_usage_prompt_tokens = prompt_tokens;
    if (__builtin_mul_overflow(std::max<std::uint64_t>(sequences, 1), std::max<std::uint64_t>(request_.n, 1),
                               &admitted.sequences))
        admitted.sequences = UINT64_MAX;
    admitted.stream = request_.stream;
    admitted.include_usage = request_.include_usage;
    admitted.has_stream_options = request_.has_stream_options;
    admitted.has_prompt_cache_key = request_.has_prompt_cache_key;
    admitted.prompt_cache_key = request_.prompt_cache_key;
    admitted.user = request_.user;
    if (chat) {
        admitted.head_hash = conversationHeadKey(request_.chat, head_scratch_, head_view_);
    } else if (!request_.prompt_texts.empty()) {
        routing::ConversationView view;
        view.messages.push_back({"prompt", request_.prompt_texts.front()});
        admitted.head_hash = routing::conversationHeadKey(view);
    }
    return admitted;
}

}  // namespace dpgate::admission
