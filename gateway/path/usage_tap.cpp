#include "gateway/path/usage_tap.hpp"

namespace dpgate::gateway {

namespace {
constexpr size_t kAnswerCopyBytes = 1 << 20;
constexpr size_t kAnswerEndBytes = 64 << 10;
}  // namespace

UsageTap::UsageTap(Mode mode, uint64_t max_usage_tokens)
    : mode_(mode),
      max_usage_tokens_(max_usage_tokens),
      events_(SseUsageParser::kDefaultMaxEventBytes, max_usage_tokens) {}

std::string_view UsageTap::pass(std::string_view piece, bool first, bool last) {
    switch (mode_) {
        case Mode::filter:
            filtered_.clear();
            events_.filter(piece, filtered_);
            if (last) events_.finish(&filtered_);
            return filtered_;
        case Mode::observe: events_.observe(piece); return piece;
        case Mode::json: break;
    }
    if (first && last) {
        whole_answer_ = piece;  // the relay's buffer holds it until the usage is read
        return piece;
    }
    answer_copy_.append(piece);
    if (answer_copy_.size() > kAnswerCopyBytes) {
        // Past 1 MiB (logprobs, many choices) only the answer's end is kept:
        // its usage is there.
        copy_cut_ = true;
        answer_copy_.erase(0, answer_copy_.size() - kAnswerEndBytes);
    }
    return piece;
}

std::string_view UsageTap::finish() {
    filtered_.clear();
    if (mode_ == Mode::filter) events_.finish(&filtered_);
    return filtered_;
}

std::optional<Usage> UsageTap::usage(bool& implausible) {
    std::optional<Usage> usage;
    implausible = false;
    if (mode_ == Mode::json) {
        const UsageCheck check{.max_tokens = max_usage_tokens_, .implausible = &implausible};
        usage = copy_cut_
                    ? parseUsageJsonEnd(answer_copy_, check)
                    : parseUsageJson(whole_answer_.empty() ? std::string_view(answer_copy_) : whole_answer_, check);
    } else {
        if (mode_ == Mode::observe) events_.finish();
        usage = events_.usage();
        implausible = events_.implausibleUsage();
    }
    if (implausible) usage.reset();
    return usage;
}

}  // namespace dpgate::gateway
