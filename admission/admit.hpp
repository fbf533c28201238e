#pragma once
// Admission: judges one request body against the limits, in the order of
// issue 4 (size, shape, model, images, output budget, window, tokenizer),
// and answers with a Verdict.
//
// One Admitter per thread: it owns the JSON parser, the token counter's
// caches (which make a long conversation's next turn cheap) and the render
// buffer. The tokenizer behind it is shared and immutable.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "admission/admission_limits.hpp"
#include "admission/endpoint.hpp"
#include "admission/request_scan.hpp"
#include "admission/template/chat_encoder.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "admission/verdict.hpp"

namespace dpgate::admission {

class Admitter {
 public:
  // A null tokenizer (or one the template cannot use) leaves the Admitter
  // able to refuse and to admit on the fast path only; requests that need
  // counting get 503 tokenizer_unavailable. `error()` says why.
  Admitter(std::shared_ptr<const Tokenizer> tokenizer, std::string_view template_name);

  // `capacity_bytes` >= body.size() + kScanPaddingBytes (readable bytes from
  // body.data()) avoids copying the body; see RequestScanner.
  Verdict admit(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint, const AdmissionLimits& limits);
  Verdict admit(std::string_view body, Endpoint endpoint, const AdmissionLimits& limits) {
    return admit(body, body.size(), endpoint, limits);
  }

  const std::string& error() const { return error_; }
  bool canCount() const { return counter_.has_value() && encoder_ != nullptr; }

 private:
  std::unique_ptr<ChatEncoder> encoder_;
  std::optional<TokenCounter> counter_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::string error_;
  RequestScanner scanner_;
  ScannedRequest request_;
  std::string prompt_;  // rendered chat prompt, reused across requests
  std::vector<std::string> head_scratch_;
};

// Tokens `text` can have at most: bytes of its ordinary segments (byte-level
// BPE never yields more tokens than bytes) plus one per added token.
std::uint64_t promptTokenUpperBound(const Tokenizer& tokenizer, std::string_view text);

}  // namespace dpgate::admission
