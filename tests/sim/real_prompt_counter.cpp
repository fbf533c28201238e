#include "real_prompt_counter.hpp"

#include <nlohmann/json.hpp>

#include <ctime>

#include "admission/admit.hpp"
#include "admission/template/chat_template.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "admission/tokenizer/tokenizer.hpp"

namespace dpgate::sim {

namespace {

std::optional<nlohmann::json> parseObject(std::string_view body, std::string& error) {
    nlohmann::json value = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded() || !value.is_object()) {
        error = "The request body must be a JSON object.";
        return std::nullopt;
    }
    return value;
}

}  // namespace

RealPromptCounter::~RealPromptCounter() = default;

std::unique_ptr<RealPromptCounter> RealPromptCounter::load(const std::string& tokenizer_path,
                                                           const std::string& chat_template_path, std::string& error) {
    std::unique_ptr<RealPromptCounter> counter(new RealPromptCounter());
    admission::TokenizerLoad loaded = admission::Tokenizer::load(tokenizer_path);
    if (!loaded.tokenizer) {
        error = "--tokenizer " + tokenizer_path + ": " + loaded.error;
        return nullptr;
    }
    admission::ChatTemplate::LoadOptions options;
    options.tokenizer = tokenizer_path;
    options.chat_template = chat_template_path;
    std::string template_error;
    auto chat_template = admission::ChatTemplate::load(options, template_error);
    if (!chat_template) {
        error =
            (chat_template_path.empty() ? "--tokenizer " + tokenizer_path : "--chat-template " + chat_template_path) +
            ": " + template_error;
        return nullptr;
    }
    counter->admitter_ = std::make_unique<admission::Admitter>(
        loaded.tokenizer, chat_template, [] { return static_cast<std::int64_t>(std::time(nullptr)); });
    counter->counter_ = std::make_unique<admission::TokenCounter>(loaded.tokenizer);
    return counter;
}

std::optional<std::uint64_t> RealPromptCounter::count(std::string_view chat_body, std::string& error) {
    std::lock_guard lock(mutex_);
    const admission::Admitter::ChatCount count = admitter_->countChat(chat_body);
    if (!count.ok) {
        error = count.error;
        return std::nullopt;
    }
    return count.prompt_tokens;
}

std::optional<std::uint64_t> RealPromptCounter::countCompletion(std::string_view completions_body, std::string& error) {
    std::optional<nlohmann::json> body = parseObject(completions_body, error);
    if (!body) return std::nullopt;
    auto prompt = body->find("prompt");
    if (prompt == body->end()) {
        error = "\"prompt\" is required";
        return std::nullopt;
    }
    std::lock_guard lock(mutex_);
    std::uint64_t total = 0;
    auto text = [&](const std::string& value) -> bool {
        const admission::TokenCount count = counter_->count(value);
        if (!count.ok) {
            error = "prompt: " + count.error;
            return false;
        }
        total += count.tokens + 1;  // BOS: add_special_tokens is true for completions
        return true;
    };
    auto ids = [&](const nlohmann::json& list) -> bool {
        for (const nlohmann::json& id : list)
            if (!id.is_number_integer()) return false;
        total += list.size();
        return true;
    };
    const char* shape = "\"prompt\" must be a string, a list of strings or a list of token ids";
    if (prompt->is_string()) {
        if (!text(prompt->get_ref<const std::string&>())) return std::nullopt;
        return total;
    }
    if (!prompt->is_array() || prompt->empty()) {
        error = shape;
        return std::nullopt;
    }
    if (prompt->front().is_number_integer()) {
        if (!ids(*prompt)) {
            error = shape;
            return std::nullopt;
        }
        return total;
    }
    for (const nlohmann::json& item : *prompt) {
        bool ok = item.is_string() ? text(item.get_ref<const std::string&>()) : item.is_array() && ids(item);
        if (!ok) {
            if (error.empty()) error = shape;
            return std::nullopt;
        }
    }
    return total;
}

}  // namespace dpgate::sim
