#include "response_builder.hpp"

#include "json_escape.hpp"
#include "prompt_hasher.hpp"

namespace dpgate::sim {

namespace {

constexpr std::string_view kWords[] = {
    "the",    "model",   "answers", "with",   "simulated", "tokens", "from",   "a",     "prefix", "cache",  "rank",
    "stream", "gateway", "context", "window", "of",        "deep",   "seek",   "flash", "batch",  "decode", "prefill",
    "block",  "hash",    "turn",    "agent",  "tool",      "call",   "result", "and",   "then",   "done",
};

void appendUsage(std::string& out, const Usage& usage) {
    out += "\"usage\":{\"prompt_tokens\":";
    out += std::to_string(usage.prompt_tokens);
    out += ",\"total_tokens\":";
    out += std::to_string(usage.prompt_tokens + usage.completion_tokens);
    out += ",\"completion_tokens\":";
    out += std::to_string(usage.completion_tokens);
    if (usage.details) {
        out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
        out += std::to_string(usage.cached_tokens);
        out += '}';
    }
    out += '}';
}

void appendFinish(std::string& out, std::string_view finish_reason) {
    out += ",\"finish_reason\":";
    if (finish_reason.empty()) {
        out += "null";
    } else {
        out += '"';
        out += finish_reason;
        out += '"';
    }
}

std::string event(std::string body) {
    std::string out;
    out.reserve(body.size() + 8);
    out += "data: ";
    out += body;
    out += "\n\n";
    return out;
}

}  // namespace

std::string errorJson(std::string_view message, std::string_view type, int code) {
    std::string out = "{\"object\":\"error\",\"message\":";
    out += jsonQuoted(message);
    out += ",\"type\":";
    out += jsonQuoted(type);
    out += ",\"param\":null,\"code\":";
    out += std::to_string(code);
    out += '}';
    return out;
}

std::string generatedPiece(std::uint64_t seed, std::uint64_t index) {
    auto word = kWords[mix64(seed + index) % std::size(kWords)];
    std::string piece;
    if (index > 0) piece += ' ';
    piece += word;
    return piece;
}

ResponseBuilder::ResponseBuilder(ApiKind kind, std::string id, std::int64_t created, std::string_view model,
                                 bool stream) {
    std::string_view object =
        kind == ApiKind::kChat ? (stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    head_ = "{\"id\":";
    head_ += jsonQuoted(id);
    head_ += ",\"object\":\"";
    head_ += object;
    head_ += "\",\"created\":";
    head_ += std::to_string(created);
    head_ += ",\"model\":";
    head_ += jsonQuoted(model);
}

std::string ResponseBuilder::chatCompletion(std::string_view text, std::string_view finish_reason,
                                            const Usage& usage) const {
    std::string out = head_;
    out += ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":";
    out += jsonQuoted(text);
    out += ",\"tool_calls\":[]},\"logprobs\":null";
    appendFinish(out, finish_reason);
    out += ",\"stop_reason\":null}],";
    appendUsage(out, usage);
    out += ",\"prompt_logprobs\":null}";
    return out;
}

std::string ResponseBuilder::chatToolCall(std::string_view call_id, std::string_view name, const Usage& usage) const {
    std::string out = head_;
    out +=
        ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,"
        "\"tool_calls\":[{\"id\":";
    out += jsonQuoted(call_id);
    out += ",\"type\":\"function\",\"function\":{\"name\":";
    out += jsonQuoted(name);
    out += ",\"arguments\":\"{}\"}}]},\"logprobs\":null";
    appendFinish(out, "tool_calls");
    out += ",\"stop_reason\":null}],";
    appendUsage(out, usage);
    out += ",\"prompt_logprobs\":null}";
    return out;
}

std::string ResponseBuilder::textCompletion(std::string_view text, std::string_view finish_reason,
                                            const Usage& usage) const {
    std::string out = head_;
    out += ",\"choices\":[{\"index\":0,\"text\":";
    out += jsonQuoted(text);
    out += ",\"logprobs\":null";
    appendFinish(out, finish_reason);
    out += ",\"stop_reason\":null,\"prompt_logprobs\":null}],";
    appendUsage(out, usage);
    out += '}';
    return out;
}

std::string ResponseBuilder::chatRoleEvent() const {
    return event(head_ +
                 ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                 "\"logprobs\":null,\"finish_reason\":null}]}");
}

std::string ResponseBuilder::chatContentEvent(std::string_view piece, std::string_view finish_reason) const {
    std::string out = head_;
    out += ",\"choices\":[{\"index\":0,\"delta\":{\"content\":";
    out += jsonQuoted(piece);
    out += "},\"logprobs\":null";
    appendFinish(out, finish_reason);
    if (!finish_reason.empty()) out += ",\"stop_reason\":null";
    out += "}]}";
    return event(std::move(out));
}

std::string ResponseBuilder::chatToolCallStartEvent(std::string_view call_id, std::string_view name) const {
    std::string out = head_;
    out += ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":";
    out += jsonQuoted(call_id);
    out += ",\"type\":\"function\",\"index\":0,\"function\":{\"name\":";
    out += jsonQuoted(name);
    out += ",\"arguments\":\"\"}}]},\"logprobs\":null,\"finish_reason\":null}]}";
    return event(std::move(out));
}

std::string ResponseBuilder::chatToolCallArgumentsEvent(std::string_view arguments) const {
    std::string out = head_;
    out +=
        ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{"
        "\"arguments\":";
    out += jsonQuoted(arguments);
    out += "}}]},\"logprobs\":null,\"finish_reason\":\"tool_calls\",\"stop_reason\":null}]}";
    return event(std::move(out));
}

std::string ResponseBuilder::textEvent(std::string_view piece, std::string_view finish_reason) const {
    std::string out = head_;
    out += ",\"choices\":[{\"index\":0,\"text\":";
    out += jsonQuoted(piece);
    out += ",\"logprobs\":null";
    appendFinish(out, finish_reason);
    out += ",\"stop_reason\":null}]}";
    return event(std::move(out));
}

std::string ResponseBuilder::usageEvent(const Usage& usage) const {
    std::string out = head_;
    out += ",\"choices\":[],";
    appendUsage(out, usage);
    out += '}';
    return event(std::move(out));
}

}  // namespace dpgate::sim
