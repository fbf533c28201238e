#include "gateway/ops/accept_checks.hpp"

#include "gateway/backends/backend_registry.hpp"
#include "gateway/backends/health_checker.hpp"
#include "gateway/metrics/backend_metrics.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <random>

namespace dpgate::acceptance {
namespace {

using json = nlohmann::json;
using gateway::awaitable;
using gateway::HealthChecker;
namespace http = gateway::http;

// A 1x1 PNG: the smallest image a vision model accepts.
constexpr const char* kTinyPng =
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

json userMessage(json content) { return {{"role", "user"}, {"content", std::move(content)}}; }

json weatherTool() {
    return {{"type", "function"},
            {"function",
             {{"name", "get_weather"},
              {"description", "The current weather in a city."},
              {"parameters",
               {{"type", "object"},
                {"properties", {{"city", {{"type", "string"}, {"description", "The city's name."}}}}},
                {"required", {"city"}}}}}}};
}

// Deterministic text of `sentences` varied sentences (numbers keep the
// tokenizer from seeing one repeated word).
std::string fillerText(size_t sentences, std::string_view seed) {
    static constexpr const char* kWords[] = {"rank",    "prefix",  "cache", "window",  "token",  "stream",
                                             "gateway", "backend", "model", "prefill", "decode", "accept"};
    std::string text(seed);
    text += '\n';
    for (size_t i = 0; i < sentences; ++i) {
        text += "Sentence ";
        text += std::to_string(i);
        text += " checks the ";
        text += kWords[i % 12];
        text += " and the ";
        text += kWords[(i * 7 + 3) % 12];
        text += ".\n";
    }
    return text;
}

// A nonce so a prompt is new to the backend's prefix cache on every run.
std::string nonce() {
    std::random_device device;
    return "acceptance run " + std::to_string(device()) + "-" + std::to_string(device());
}

std::string clip(std::string_view text, size_t n = 160) {
    std::string out(text.substr(0, n));
    for (char& c : out)
        if (c == '\n' || c == '\r') c = ' ';
    return text.size() > n ? out + "..." : out;
}

// "answered 400: <message>" from a backend's error answer.
std::string failure(const HealthChecker::Fetched& f) {
    if (f.status == 0) return f.error;
    json doc = json::parse(f.body, nullptr, false);
    std::string message;
    if (doc.is_object()) {
        if (doc.contains("message") && doc["message"].is_string()) message = doc["message"].get<std::string>();
        else if (doc.contains("error") && doc["error"].is_object() && doc["error"].contains("message") &&
                 doc["error"]["message"].is_string())
            message = doc["error"]["message"].get<std::string>();
    }
    return "answered " + std::to_string(f.status) + (message.empty() ? "" : ": " + clip(message));
}

const json* usageOf(const json& doc) {
    if (!doc.is_object() || !doc.contains("usage") || !doc["usage"].is_object()) return nullptr;
    return &doc["usage"];
}

std::optional<uint64_t> promptTokensOf(const json& doc) {
    const json* usage = usageOf(doc);
    if (!usage || !usage->contains("prompt_tokens") || !(*usage)["prompt_tokens"].is_number_unsigned())
        return std::nullopt;
    return (*usage)["prompt_tokens"].get<uint64_t>();
}

const json* firstChoice(const json& doc) {
    if (!doc.is_object() || !doc.contains("choices") || !doc["choices"].is_array() || doc["choices"].empty())
        return nullptr;
    return &doc["choices"][0];
}

// The answer's text (content, else reasoning), when it has a message at all.
std::optional<std::string> answerText(const json& doc) {
    const json* choice = firstChoice(doc);
    if (!choice || !choice->contains("message") || !(*choice)["message"].is_object()) return std::nullopt;
    const json& message = (*choice)["message"];
    for (const char* key : {"content", "reasoning_content"})
        if (message.contains(key) && message[key].is_string() && !message[key].get<std::string>().empty())
            return message[key].get<std::string>();
    return std::string();
}

class Runner {
public:
    explicit Runner(const AcceptInputs& in) : in_(in) {
        const conf::ModelConfig& model = in.config.model;
        limits_.served_model_id = model.id;
        limits_.model_aliases = model.aliases;
        limits_.window_tokens = model.window_tokens;
        limits_.max_output_tokens = model.max_output_tokens;
        limits_.image_reserve_tokens = model.image_reserve_tokens;
        limits_.max_images = model.max_images;
        limits_.max_body_bytes = in.config.limits.max_body_bytes;
    }

    awaitable<AcceptanceRecord> run(const std::function<void(const CheckResult&)>& verdict) {
        AcceptanceRecord record;
        record.backend = in_.backend.name;
        record.url = in_.backend.url;
        record.time = utcNow();
        record.configured_window = in_.config.model.window_tokens;
        record.dp_ranks = in_.backend.dp_ranks;
        auto add = [&](CheckResult&& result) {
            verdict(result);
            record.checks.push_back(std::move(result));
        };
        // One statement per await: GCC 12 mishandles temporaries of a
        // co_await used as a call argument or inside ?:.
        CheckResult check = co_await models(record.identity);
        add(std::move(check));
        check = co_await metricsRanks();
        add(std::move(check));
        check = co_await rankAnswers();
        add(std::move(check));
        check = co_await stream();
        add(std::move(check));
        check = co_await prefixCache();
        add(std::move(check));
        check = co_await toolCall();
        add(std::move(check));
        check = co_await images(16, "images_16");
        add(std::move(check));
        check = co_await images(in_.config.model.max_images, "images_640");
        add(std::move(check));
        check = co_await windowEdge();
        add(std::move(check));
        check = co_await countAgreement();
        add(std::move(check));
        record.passed = std::all_of(record.checks.begin(), record.checks.end(), [](const auto& c) { return c.passed; });
        co_return record;
    }

private:
    awaitable<HealthChecker::Fetched> get(const char* target) {
        HealthChecker::Call call;
        call.target = target;
        call.timeout_ms = in_.config.health.timeout_ms * 10;
        co_return co_await HealthChecker::call(in_.backend, call);
    }

    awaitable<HealthChecker::Fetched> post(const json& body, std::optional<uint32_t> rank) {
        co_return co_await postText(body.dump(), rank);
    }

    awaitable<HealthChecker::Fetched> postText(std::string body, std::optional<uint32_t> rank) {
        HealthChecker::Call call;
        call.method = http::verb::post;
        call.target = "/v1/chat/completions";
        call.body = std::move(body);
        call.timeout_ms = in_.config.limits.upstream_first_byte_timeout_ms;
        if (rank) call.headers.emplace_back("X-data-parallel-rank", std::to_string(*rank));
        if (!in_.backend.credential_env.empty())
            if (const char* token = std::getenv(in_.backend.credential_env.c_str()))
                call.headers.emplace_back("Authorization", std::string("Bearer ") + token);
        co_return co_await HealthChecker::call(in_.backend, call);
    }

    json chat(json messages, uint64_t max_tokens) const {
        return {{"model", in_.config.model.id}, {"messages", std::move(messages)}, {"max_tokens", max_tokens}};
    }

    // Admission as the gateway judges the body; "" when admitted.
    std::string refusal(const std::string& body, std::string* code = nullptr) {
        admission::Verdict verdict = in_.admitter.admit(body, admission::Endpoint::chat_completions, limits_);
        if (const auto* refused = std::get_if<admission::Refused>(&verdict)) {
            if (code) *code = refused->code;
            return refused->message.empty() ? "refused" : refused->message;
        }
        return {};
    }

    awaitable<CheckResult> models(BackendIdentity& identity) {
        CheckResult r{"models", false, {}};
        const conf::Config& config = in_.config;
        gateway::ProbeResult probe =
            co_await HealthChecker::probe(in_.backend, config.model.id, config.health.timeout_ms * 10);
        identity = gateway::identityOf(config.model.id, probe);
        if (!probe.health_ok) {
            r.detail = "/health: " + (probe.error.empty() ? std::string("failed") : probe.error);
            co_return r;
        }
        if (!probe.models_ok) {
            r.detail = "/health 200; " + probe.error;
            co_return r;
        }
        if (std::find(probe.model_ids.begin(), probe.model_ids.end(), config.model.id) == probe.model_ids.end()) {
            std::string listed;
            for (const std::string& id : probe.model_ids) listed += (listed.empty() ? "" : ", ") + id;
            r.detail = "/v1/models does not serve " + config.model.id + " (it lists: " + clip(listed) + ")";
            co_return r;
        }
        if (probe.max_model_len != config.model.window_tokens) {
            r.detail = "/v1/models: " + config.model.id + " has max_model_len " + std::to_string(probe.max_model_len) +
                       ", the configured window is " + std::to_string(config.model.window_tokens);
            co_return r;
        }
        r.passed = true;
        r.detail = "/health 200; /v1/models serves " + config.model.id + " with max_model_len " +
                   std::to_string(probe.max_model_len) + " = the configured window";
        co_return r;
    }

    awaitable<std::optional<metrics::BackendRankTable>> rankTable(std::string& error) {
        HealthChecker::Fetched page = co_await get("/metrics");
        if (page.status != 200) {
            error = "/metrics " + failure(page);
            co_return std::nullopt;
        }
        co_return metrics::parseBackendMetrics(page.body);
    }

    awaitable<CheckResult> metricsRanks() {
        CheckResult r{"metrics_ranks", false, {}};
        std::string error;
        std::optional<metrics::BackendRankTable> table = co_await rankTable(error);
        if (!table) {
            r.detail = error;
            co_return r;
        }
        const uint32_t ranks = in_.backend.dp_ranks;
        std::string missing, extra;
        for (uint32_t rank = 0; rank < ranks; ++rank)
            if (!table->find(int(rank))) missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
        for (const metrics::BackendRankRow& row : table->rows)
            if (row.rank < 0 || uint32_t(row.rank) >= ranks)
                extra += (extra.empty() ? "" : ", ") + std::to_string(row.rank);
        if (!missing.empty() || !extra.empty()) {
            r.detail = "/metrics shows " + std::to_string(table->rows.size()) + " ranks, " + std::to_string(ranks) +
                       " are configured" + (missing.empty() ? "" : "; missing rank " + missing) +
                       (extra.empty() ? "" : "; rank " + extra + " is not configured");
            co_return r;
        }
        r.passed = true;
        r.detail = "/metrics shows all " + std::to_string(ranks) + " configured ranks (engine 0-" +
                   std::to_string(ranks - 1) + ")";
        co_return r;
    }

    awaitable<CheckResult> rankAnswers() {
        CheckResult r{"rank_answers", false, {}};
        std::string error;
        std::optional<metrics::BackendRankTable> before = co_await rankTable(error);
        const uint32_t ranks = in_.backend.dp_ranks;
        std::vector<uint64_t> sent(ranks, 0);
        std::string failures;
        for (uint32_t rank = 0; rank < ranks; ++rank) {
            json body = chat(json::array({userMessage("Acceptance check: answer with one word, rank " +
                                                      std::to_string(rank) + ".")}),
                             8);
            HealthChecker::Fetched answer = co_await post(body, rank);
            json doc = json::parse(answer.body, nullptr, false);
            std::optional<std::string> text = answer.status == 200 ? answerText(doc) : std::nullopt;
            if (!text) {
                failures +=
                    (failures.empty() ? "" : "; ") + ("rank " + std::to_string(rank) + " " +
                                                      (answer.status == 200 ? "answered no message" : failure(answer)));
                continue;
            }
            sent[rank] = promptTokensOf(doc).value_or(0);
        }
        if (!failures.empty()) {
            r.detail = failures;
            co_return r;
        }
        // Pinning proved by the backend's own per-rank prompt-token counters.
        std::optional<metrics::BackendRankTable> after;
        if (before) after = co_await rankTable(error);
        std::string unpinned;
        uint32_t verified = 0;
        for (uint32_t rank = 0; before && after && rank < ranks; ++rank) {
            const metrics::BackendRankRow* a = before->find(int(rank));
            const metrics::BackendRankRow* b = after->find(int(rank));
            if (!a || !b || !a->prompt_tokens || !b->prompt_tokens) continue;
            ++verified;
            if (*b->prompt_tokens - *a->prompt_tokens < double(sent[rank]))
                unpinned += (unpinned.empty() ? "" : ", ") + std::to_string(rank);
        }
        if (!unpinned.empty()) {
            r.detail = "every rank answered, but the prompt-token counter of rank " + unpinned +
                       " did not move by its request: X-data-parallel-rank is not honoured";
            co_return r;
        }
        r.passed = true;
        r.detail = "all " + std::to_string(ranks) + " ranks answered when pinned with X-data-parallel-rank" +
                   (verified == ranks ? "; each rank's prompt-token counter moved by its request"
                                      : "; pinning verified on " + std::to_string(verified) +
                                            " ranks (/metrics has no "
                                            "per-rank prompt tokens)");
        co_return r;
    }

    awaitable<CheckResult> stream() {
        CheckResult r{"stream", false, {}};
        json body = chat(json::array({userMessage("Acceptance check: stream a short answer.")}), 16);
        body["stream"] = true;
        body["stream_options"] = {{"include_usage", true}};
        HealthChecker::Fetched answer = co_await post(body, 0);
        if (answer.status != 200) {
            r.detail = "stream " + failure(answer);
            co_return r;
        }
        size_t chunks = 0;
        bool done = false, after_done = false, usage = false, content = false;
        size_t at = 0;
        while (at < answer.body.size()) {
            size_t end = answer.body.find('\n', at);
            if (end == std::string::npos) end = answer.body.size();
            std::string_view line(answer.body.data() + at, end - at);
            at = end + 1;
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (!line.starts_with("data:")) continue;
            std::string_view data = line.substr(5);
            if (data.starts_with(' ')) data.remove_prefix(1);
            if (done) after_done = true;
            if (data == "[DONE]") {
                done = true;
                continue;
            }
            ++chunks;
            json chunk = json::parse(data, nullptr, false);
            if (const json* u = usageOf(chunk); u && u->contains("prompt_tokens")) usage = true;
            if (const json* choice = firstChoice(chunk); choice && choice->contains("delta")) {
                const json& delta = (*choice)["delta"];
                for (const char* key : {"content", "reasoning_content"})
                    if (delta.is_object() && delta.contains(key) && delta[key].is_string() &&
                        !delta[key].get<std::string>().empty())
                        content = true;
            }
        }
        if (!done || after_done)
            r.detail = done ? "events after data: [DONE]" : "the stream did not end in data: [DONE]";
        else if (!usage) r.detail = "no chunk carried usage (stream_options.include_usage was sent)";
        else if (!content) r.detail = "no chunk carried text";
        else {
            r.passed = true;
            r.detail = std::to_string(chunks) + " chunks with text and a usage chunk, then data: [DONE]";
        }
        co_return r;
    }

    awaitable<CheckResult> prefixCache() {
        CheckResult r{"prefix_cache", false, {}};
        const uint32_t rank = in_.backend.dp_ranks > 1 ? 1 : 0;
        json body = chat(json::array({userMessage(fillerText(400, nonce()) + "Answer with one word.")}), 4);
        std::optional<uint64_t> cached[2];
        bool details[2] = {false, false};
        for (int turn = 0; turn < 2; ++turn) {
            HealthChecker::Fetched answer = co_await post(body, rank);
            if (answer.status != 200) {
                r.detail = (turn == 0 ? "first request " : "repeat ") + failure(answer);
                co_return r;
            }
            json doc = json::parse(answer.body, nullptr, false);
            const json* usage = usageOf(doc);
            if (usage && usage->contains("prompt_tokens_details") && (*usage)["prompt_tokens_details"].is_object()) {
                details[turn] = true;
                const json& d = (*usage)["prompt_tokens_details"];
                if (d.contains("cached_tokens") && d["cached_tokens"].is_number_unsigned())
                    cached[turn] = d["cached_tokens"].get<uint64_t>();
            }
        }
        if (!details[1] || !cached[1]) {
            r.detail = "backend does not report cached tokens (start it with --enable-prompt-tokens-details)";
            co_return r;
        }
        if (*cached[1] == 0) {
            r.detail = "the repeat on rank " + std::to_string(rank) +
                       " reported cached_tokens 0: the prefix cache missed (is prefix caching on?)";
            co_return r;
        }
        r.passed = true;
        r.detail = "the same prompt twice on rank " + std::to_string(rank) + ": cached_tokens " +
                   std::to_string(cached[0].value_or(0)) + " then " + std::to_string(*cached[1]);
        co_return r;
    }

    awaitable<CheckResult> toolCall() {
        CheckResult r{"tool_call", false, {}};
        json messages = json::array({userMessage("What is the weather in Lisbon? Use the tool.")});
        json body = chat(messages, 64);
        body["tools"] = json::array({weatherTool()});
        body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
        HealthChecker::Fetched answer = co_await post(body, 0);
        if (answer.status != 200) {
            r.detail = "the call " + failure(answer);
            co_return r;
        }
        json doc = json::parse(answer.body, nullptr, false);
        const json* choice = firstChoice(doc);
        const json* calls = nullptr;
        if (choice && choice->contains("message") && (*choice)["message"].is_object() &&
            (*choice)["message"].contains("tool_calls") && (*choice)["message"]["tool_calls"].is_array() &&
            !(*choice)["message"]["tool_calls"].empty())
            calls = &(*choice)["message"]["tool_calls"];
        if (!calls) {
            r.detail = "the answer has no tool_calls";
            co_return r;
        }
        const json& call = (*calls)[0];
        bool named = call.contains("function") && call["function"].is_object() && call["function"].contains("name") &&
                     call["function"]["name"] == "get_weather";
        bool arguments = named && call["function"].contains("arguments") && call["function"]["arguments"].is_string() &&
                         !json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false).is_discarded();
        if (!named || !arguments || !call.contains("id") || !call["id"].is_string()) {
            r.detail = "the tool call is not get_weather with JSON arguments and an id: " + clip(call.dump());
            co_return r;
        }
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", *calls}});
        messages.push_back({{"role", "tool"},
                            {"tool_call_id", call["id"]},
                            {"content", R"({"city": "Lisbon", "temperature_c": 21, "sky": "clear"})"}});
        json second = chat(messages, 32);
        second["tools"] = json::array({weatherTool()});
        HealthChecker::Fetched result = co_await post(second, 0);
        json result_doc = json::parse(result.body, nullptr, false);
        if (result.status != 200 || !answerText(result_doc)) {
            r.detail = "the tool result " + (result.status == 200 ? std::string("got no message") : failure(result));
            co_return r;
        }
        r.passed = true;
        r.detail = "get_weather called with " + clip(call["function"]["arguments"].get<std::string>(), 60) +
                   ", its result answered";
        co_return r;
    }

    json imageMessage(size_t count) const {
        json parts = json::array();
        for (size_t i = 1; i <= count; ++i) {
            parts.push_back({{"type", "text"}, {"text", "Image " + std::to_string(i) + ":"}});
            parts.push_back({{"type", "image_url"}, {"image_url", {{"url", kTinyPng}}}});
        }
        parts.push_back({{"type", "text"}, {"text", "How many images? Answer with a number."}});
        return chat(json::array({userMessage(std::move(parts))}), 8);
    }

    awaitable<CheckResult> images(uint64_t count, const char* name) {
        CheckResult r{name, false, {}};
        std::string body = imageMessage(count).dump();
        if (std::string refused = refusal(body); !refused.empty()) {
            r.detail = std::to_string(count) + " images refused by admission: " + clip(refused);
            co_return r;
        }
        HealthChecker::Fetched answer = co_await postText(body, 0);
        if (answer.status != 200 || !answerText(json::parse(answer.body, nullptr, false))) {
            r.detail = std::to_string(count) + " images: " + (answer.status == 200 ? "no message" : failure(answer));
            co_return r;
        }
        r.detail = std::to_string(count) + " images answered";
        if (count == in_.config.model.max_images) {
            std::string code;
            std::string refused = refusal(imageMessage(count + 1).dump(), &code);
            if (refused.empty()) {
                r.detail +=
                    "; " + std::to_string(count + 1) + " images were admitted, the limit is " + std::to_string(count);
                co_return r;
            }
            r.detail += "; " + std::to_string(count + 1) + " refused (" + code + ")";
        }
        r.passed = true;
        co_return r;
    }

    // The body `sentences` of filler make, and its exact prompt count.
    std::optional<uint64_t> fillerCount(size_t sentences, const std::string& seed, std::string& body,
                                        std::string& error) {
        body = chat(json::array({userMessage(fillerText(sentences, seed))}), 1).dump();
        admission::Admitter::ChatCount count = in_.admitter.countChat(body);
        if (!count.ok) {
            error = count.error.empty() ? in_.admitter.error() : count.error;
            return std::nullopt;
        }
        return count.prompt_tokens;
    }

    awaitable<CheckResult> windowEdge() {
        CheckResult r{"window_edge", false, {}};
        const uint64_t window = in_.config.model.window_tokens;
        const std::string seed = nonce();
        std::string body, error;
        // The largest filler whose prompt leaves room for at least one output
        // token, searched between bounds from a 1,000-sentence sample.
        std::optional<uint64_t> low_count = fillerCount(0, seed, body, error);
        std::optional<uint64_t> sample = low_count ? fillerCount(1000, seed, body, error) : std::nullopt;
        if (!sample || *sample <= *low_count) {
            r.detail = "dpgate cannot count: " + clip(error.empty() ? "the filler does not grow" : error);
            co_return r;
        }
        const double per_sentence = double(*sample - *low_count) / 1000;
        size_t low = 0, high = size_t(double(window) / per_sentence * 1.1) + 16;
        if (std::optional<uint64_t> n = fillerCount(size_t(double(window) / per_sentence * 0.9), seed, body, error);
            n && *n < window) {
            low = size_t(double(window) / per_sentence * 0.9);
            low_count = n;
        }
        while (high - low > 1) {
            size_t mid = low + (high - low) / 2;
            std::optional<uint64_t> n = fillerCount(mid, seed, body, error);
            if (!n) {
                r.detail = "dpgate cannot count: " + clip(error);
                co_return r;
            }
            if (*n < window) {
                low = mid;
                low_count = n;
            } else {
                high = mid;
            }
        }
        fillerCount(low, seed, body, error);
        const uint64_t prompt = *low_count;
        const uint64_t output = window - prompt;
        if (output > in_.config.model.max_output_tokens) {
            r.detail = "no prompt fills the window to within max_output_tokens (" + std::to_string(output) + " left)";
            co_return r;
        }
        json exact = json::parse(body);
        exact["max_tokens"] = output;
        json over = exact;
        over["max_tokens"] = output + 1;
        const std::string exact_text = exact.dump(), over_text = over.dump();
        if (std::string refused = refusal(exact_text); !refused.empty()) {
            r.detail = "exactly the window (" + std::to_string(prompt) + " + " + std::to_string(output) +
                       ") refused by admission: " + clip(refused);
            co_return r;
        }
        std::string code;
        if (refusal(over_text, &code).empty()) {
            r.detail = "one token over the window was admitted";
            co_return r;
        }
        HealthChecker::Fetched answer = co_await postText(exact_text, 0);
        if (answer.status != 200) {
            r.detail = "exactly the window (" + std::to_string(prompt) + " prompt + " + std::to_string(output) +
                       " output) was admitted but the backend " + failure(answer);
            co_return r;
        }
        HealthChecker::Fetched beyond = co_await postText(over_text, 0);
        if (beyond.status != 400) {
            r.detail = "one token over: admission refuses it, but the backend " +
                       (beyond.status == 200 ? std::string("answered it (its window is larger)") : failure(beyond));
            co_return r;
        }
        r.passed = true;
        r.detail = std::to_string(prompt) + " prompt + " + std::to_string(output) +
                   " output = " + std::to_string(window) + " admitted and answered; one more refused (" + code +
                   "), by the backend too";
        co_return r;
    }

    std::vector<std::pair<std::string, json>> countBodies() const {
        std::vector<std::pair<std::string, json>> out;
        const json tool_calls =
            json::array({{{"id", "call_accept_1"},
                          {"type", "function"},
                          {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Porto"})"}}}}});
        out.emplace_back("text", chat(json::array({userMessage("Count me exactly, please.")}), 1));
        out.emplace_back("system", chat(json::array({{{"role", "system"}, {"content", "You are terse."}},
                                                     userMessage("Résumé: naïve café, 東京, emoji 🙂.")}),
                                        1));
        out.emplace_back("history", chat(json::array({{{"role", "system"}, {"content", "You answer in one line."}},
                                                      userMessage("First question?"),
                                                      {{"role", "assistant"}, {"content", "First answer."}},
                                                      userMessage("Second question, with a list:\n- a\n- b")}),
                                         1));
        json with_tools = chat(json::array({userMessage("Weather in Porto?")}), 1);
        with_tools["tools"] = json::array({weatherTool()});
        out.emplace_back("tools", with_tools);
        json calls = chat(json::array({userMessage("Weather in Porto?"),
                                       {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", tool_calls}},
                                       {{"role", "tool"}, {"tool_call_id", "call_accept_1"}, {"content", "18 C, rain"}},
                                       userMessage("And tomorrow?")}),
                          1);
        calls["tools"] = json::array({weatherTool()});
        out.emplace_back("tool_calls", calls);
        out.emplace_back(
            "parts",
            chat(json::array({userMessage(json::array({{{"type", "text"}, {"text", "Two parts,"}},
                                                       {{"type", "text"}, {"text", " joined as vLLM joins them."}}}))}),
                 1));
        return out;
    }

    awaitable<CheckResult> countAgreement() {
        CheckResult r{"count_agreement", false, {}};
        std::string differences;
        size_t agreed = 0;
        auto bodies = countBodies();
        for (const auto& [name, body] : bodies) {
            const std::string text = body.dump();
            admission::Admitter::ChatCount count = in_.admitter.countChat(text);
            if (!count.ok) {
                differences += (differences.empty() ? "" : "; ") + name + ": dpgate cannot count (" +
                               clip(count.error.empty() ? in_.admitter.error() : count.error) + ")";
                continue;
            }
            HealthChecker::Fetched answer = co_await postText(text, 0);
            std::optional<uint64_t> reported =
                answer.status == 200 ? promptTokensOf(json::parse(answer.body, nullptr, false)) : std::nullopt;
            if (!reported) {
                differences += (differences.empty() ? "" : "; ") + name + ": " +
                               (answer.status == 200 ? "no usage.prompt_tokens" : failure(answer));
                continue;
            }
            if (*reported != count.prompt_tokens) {
                differences += (differences.empty() ? "" : "; ") + name + ": dpgate counts " +
                               std::to_string(count.prompt_tokens) + ", the backend " + std::to_string(*reported);
                continue;
            }
            ++agreed;
        }
        if (!differences.empty()) {
            r.detail = std::to_string(agreed) + " of " + std::to_string(bodies.size()) + " agree; " + differences;
            co_return r;
        }
        r.passed = true;
        r.detail = "dpgate's prompt count equals usage.prompt_tokens on all " + std::to_string(bodies.size()) +
                   " requests (text, system, history, tools, tool calls, parts)";
        co_return r;
    }

    const AcceptInputs& in_;
    admission::AdmissionLimits limits_;
};

}  // namespace

gateway::awaitable<AcceptanceRecord> runChecks(const AcceptInputs& inputs,
                                               const std::function<void(const CheckResult&)>& verdict) {
    Runner runner(inputs);
    co_return co_await runner.run(verdict);
}

}  // namespace dpgate::acceptance
