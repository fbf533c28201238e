#pragma once
// Admission: judges one request body against the limits, in this order
// (size, shape, model, images, output budget, window, tokenizer),
// and answers with a Verdict. A refusal quotes at most kMaxJsonPathBytes of
// a path and a few kilobytes of message, whatever the request holds.
//
// One Admitter per thread: it owns the JSON parser, the arena the chat
// template renders in, the token counter's caches (which make a long
// conversation's next turn cheap) and the prompt buffer. The tokenizer and
// the chat template behind it are shared and immutable.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "admission/admission_limits.hpp"
#include "admission/endpoint.hpp"
#include "admission/request_scan.hpp"
#include "admission/template/chat_template.hpp"
#include "admission/template/jinja/arena.hpp"
#include "admission/template/vllm_render.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "admission/verdict.hpp"
#include "routing/affinity_key.hpp"

namespace dpgate::admission {

class Admitter {
public:
    // A null tokenizer or chat template leaves the Admitter able to refuse and
    // to admit on the byte-bound fast path only; requests that need counting
    // get 503 tokenizer_unavailable. `error()` says why. `unix_now` gives the
    // time a template's strftime_now() formats (null: the epoch).
    // `counter_limits` bound the count caches (cache_bytes: this Admitter's
    // share of model.count_cache_bytes).
    Admitter(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<const ChatTemplate> chat_template,
             std::function<std::int64_t()> unix_now = {}, TokenCounterLimits counter_limits = {});

    // `capacity_bytes` >= body.size() + kScanPaddingBytes (readable bytes from
    // body.data()) avoids copying the body; see RequestScanner.
    Verdict admit(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint, const AdmissionLimits& limits);
    Verdict admit(std::string_view body, Endpoint endpoint, const AdmissionLimits& limits) {
        return admit(body, body.size(), endpoint, limits);
    }

    // What a thread that must not wait long (a worker's event loop) may
    // spend on one request: the rendered prompt (or the completions
    // prompts together) and the template's work. Real templates render a
    // prompt of at most the body plus a few KB in under a step per 16 body
    // bytes (jinja::RenderLimits::forRequest), so a small body stays within.
    struct QuickBound {
        std::size_t prompt_bytes = 0;
        std::uint64_t render_steps = 0;
    };
    // admit(), unless judging would go beyond `bound`: then nullopt, and the
    // request is to be judged with admit() where waiting is harmless. Either
    // way what was judged of it is forgotten.
    std::optional<Verdict> admitQuickly(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                                        const AdmissionLimits& limits, const QuickBound& bound);

    // A chat completions body's prompt tokens as the backend counts them
    // (the tokens CLI and the simulator). `prompt()` holds the rendered prompt
    // until the next call.
    struct ChatCount {
        bool ok = false;
        std::uint64_t prompt_tokens = 0;
        std::uint32_t images = 0;
        std::string param;  // on failure: the field to blame
        std::string error;
    };
    ChatCount countChat(std::string_view body, std::size_t capacity_bytes = 0);
    const std::string& prompt() const { return prompt_; }

    // False: always render with the Jinja engine, never the native rendering
    // of a template it recognises (deepseek_v3_fast_path.hpp); the tests and
    // the fuzz target that prove the two identical. True unless DPGATE_PLAIN
    // turns deepseek_v3_fast_path off.
    void setNativeRendering(bool on) { native_rendering_ = on; }

    // False: JSON validation by the plain JsonValidator only (RequestScanner::setFastJsonValidation).
    void setFastJsonValidation(bool on) { scanner_.setFastJsonValidation(on); }

    const std::string& error() const { return error_; }
    bool canCount() const { return counter_.has_value() && chat_template_ != nullptr; }
    // The count caches (null without a tokenizer): hit ratio and accounted bytes.
    const TokenCounter* counter() const { return counter_ ? &*counter_ : nullptr; }

private:
    // admit() before the refusal's texts are bounded.
    Verdict judge(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint, const AdmissionLimits& limits);
    // Renders request_.chat into prompt_; a refusal when the template refuses.
    std::optional<Refused> renderPrompt(std::size_t body_bytes);
    // Exact tokens of prompt_ with the request's add_special_tokens and truncation applied.
    TokenCount countPrompt();

    std::shared_ptr<const Tokenizer> tokenizer_;
    std::shared_ptr<const ChatTemplate> chat_template_;
    std::function<std::int64_t()> unix_now_;
    std::optional<TokenCounter> counter_;
    std::string error_;
    bool native_rendering_ = fastPathOn(FastPath::deepseek_v3_fast_path);
    // Set for the length of an admitQuickly(); deferred_ when it went beyond.
    const QuickBound* quick_ = nullptr;
    bool deferred_ = false;
    jinja::Arena arena_;
    PromptRenderers renderers_;
    RequestScanner scanner_;
    ScannedRequest request_;
    std::string prompt_;  // rendered chat prompt, reused across requests
    std::vector<std::string> head_scratch_;
    routing::ConversationView head_view_;
};

// Tokens `text` can have at most: bytes of its ordinary segments (byte-level
// BPE never yields more tokens than bytes) plus one per added token.
std::uint64_t promptTokenUpperBound(const Tokenizer& tokenizer, std::string_view text);

}  // namespace dpgate::admission
