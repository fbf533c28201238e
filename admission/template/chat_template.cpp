#include "admission/template/chat_template.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "admission/template/deepseek_v3_fast_path.hpp"
#include "admission/template/vllm_render.hpp"

namespace dpgate::admission {

namespace {

std::optional<std::string> readFile(const std::filesystem::path& path, std::string& error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        error = "cannot read " + path.string();
        return std::nullopt;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

// A special token in tokenizer_config.json: a string, or an AddedToken
// object whose `content` is the text.
std::optional<std::string> tokenText(const nlohmann::json& value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_object() && value.contains("content") && value["content"].is_string()) {
        return value["content"].get<std::string>();
    }
    return std::nullopt;
}

constexpr const char* kSpecialTokenKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                             "pad_token", "cls_token", "mask_token"};

}  // namespace

std::shared_ptr<const ChatTemplate> ChatTemplate::load(const LoadOptions& options, std::string& error) {
    std::filesystem::path dir = options.tokenizer;
    if (!dir.empty() && !std::filesystem::is_directory(dir)) dir = dir.parent_path();
    std::string config_text;
    const std::filesystem::path config_path = dir / "tokenizer_config.json";
    if (!options.tokenizer.empty() && std::filesystem::exists(config_path)) {
        auto text = readFile(config_path, error);
        if (!text) return nullptr;
        config_text = std::move(*text);
    }
    std::vector<std::pair<std::string, std::string>> sources;
    std::string origin;
    if (!options.chat_template.empty()) {
        auto text = readFile(options.chat_template, error);
        if (!text) return nullptr;
        sources.emplace_back(options.chat_template.filename().string(), std::move(*text));
        origin = options.chat_template.string();
    } else if (!options.tokenizer.empty() && std::filesystem::exists(dir / "chat_template.jinja")) {
        // transformers saves templates here (and prefers it to tokenizer_config.json's).
        auto text = readFile(dir / "chat_template.jinja", error);
        if (!text) return nullptr;
        sources.emplace_back("chat_template.jinja", std::move(*text));
        origin = (dir / "chat_template.jinja").string();
    } else if (!config_text.empty()) {
        nlohmann::json config = nlohmann::json::parse(config_text, nullptr, false);
        if (config.is_discarded() || !config.is_object()) {
            error = config_path.string() + ": not a JSON object";
            return nullptr;
        }
        const auto it = config.find("chat_template");
        if (it == config.end() || it->is_null()) {
            error = config_path.string() + " has no chat_template; give model.chat_template";
            return nullptr;
        }
        if (it->is_string()) {
            sources.emplace_back("default", it->get<std::string>());
        } else if (it->is_array()) {
            for (const auto& named : *it) {
                if (!named.is_object() || !named.contains("name") || !named.contains("template") ||
                    !named["name"].is_string() || !named["template"].is_string()) {
                    error = config_path.string() + ": chat_template entries need a name and a template";
                    return nullptr;
                }
                sources.emplace_back(named["name"].get<std::string>(), named["template"].get<std::string>());
            }
        } else {
            error = config_path.string() + ": chat_template must be a string or a list of named templates";
            return nullptr;
        }
        origin = config_path.string() + " chat_template";
    } else {
        error = "no chat template: give model.chat_template, or a tokenizer directory with tokenizer_config.json";
        return nullptr;
    }
    return build(std::move(sources), std::move(origin), config_text, options.content_format, error);
}

std::shared_ptr<const ChatTemplate> ChatTemplate::fromSource(std::string_view source,
                                                             std::string_view tokenizer_config_json,
                                                             std::string_view content_format, std::string& error) {
    return build({{"default", std::string(source)}}, "inline template", tokenizer_config_json, content_format, error);
}

std::shared_ptr<const ChatTemplate> ChatTemplate::build(std::vector<std::pair<std::string, std::string>> sources,
                                                        std::string origin, std::string_view tokenizer_config_json,
                                                        std::string_view content_format, std::string& error) {
    if (content_format != "auto" && content_format != "string" && content_format != "openai") {
        error =
            "content format must be auto, string or openai, not \"" + std::string(content_format.substr(0, 40)) + "\"";
        return nullptr;
    }
    std::shared_ptr<ChatTemplate> result(new ChatTemplate());
    result->origin_ = std::move(origin);
    // transformers picks "default" unless tools ask for "tool_use"; keep the default first.
    std::stable_sort(sources.begin(), sources.end(),
                     [](const auto& a, const auto& b) { return a.first == "default" && b.first != "default"; });
    if (sources.size() > 1 && sources.front().first != "default") {
        error = result->origin_ + ": multiple chat templates and none named \"default\"";
        return nullptr;
    }
    for (auto& [name, text] : sources) {
        std::string parse_error;
        auto tpl = jinja::Template::parse(text, parse_error);
        if (!tpl) {
            error = result->origin_ + (sources.size() > 1 ? " (" + name + ")" : "") + ": " + parse_error;
            return nullptr;
        }
        Variant variant;
        variant.name = name;
        variant.content_format = content_format == "auto"     ? detectContentFormat(*tpl)
                                 : content_format == "openai" ? ContentFormat::openai
                                                              : ContentFormat::string;
        variant.deepseek_v3_fast_path = variant.content_format == ContentFormat::string && isDeepSeekV3Template(text);
        variant.tpl = std::move(tpl);
        result->source_ += text;
        result->variants_.push_back(std::move(variant));
    }
    if (!tokenizer_config_json.empty()) {
        nlohmann::json config = nlohmann::json::parse(tokenizer_config_json, nullptr, false);
        if (config.is_discarded() || !config.is_object()) {
            error = "tokenizer_config.json is not a JSON object";
            return nullptr;
        }
        for (const char* key : kSpecialTokenKeys) {
            const auto it = config.find(key);
            if (it == config.end()) continue;
            if (auto text = tokenText(*it)) result->special_tokens_.emplace_back(key, std::move(*text));
        }
        if (const auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array()) {
            for (const auto& token : *it) {
                if (auto text = tokenText(token)) result->additional_special_tokens_.push_back(std::move(*text));
            }
        }
        auto tokenOf = [&](const char* key) -> std::optional<std::string> {
            for (const auto& [name, text] : result->special_tokens_) {
                if (name == key) return text;
            }
            return std::nullopt;
        };
        if (config.value("add_bos_token", false)) result->added_bos_ = tokenOf("bos_token");
        if (config.value("add_eos_token", false)) result->added_eos_ = tokenOf("eos_token");
    }
    for (Variant& variant : result->variants_) {
        const jinja::Template& tpl = *variant.tpl;
        variant.ids.messages = tpl.nameId("messages");
        variant.ids.tools = tpl.nameId("tools");
        variant.ids.documents = tpl.nameId("documents");
        variant.ids.add_generation_prompt = tpl.nameId("add_generation_prompt");
        variant.ids.reasoning_effort = tpl.nameId("reasoning_effort");
        variant.ids.enable_thinking = tpl.nameId("enable_thinking");
        variant.ids.additional_special_tokens = tpl.nameId("additional_special_tokens");
        for (const auto& [name, text] : result->special_tokens_) variant.ids.special_tokens.push_back(tpl.nameId(name));
    }
    result->probeTools();
    return result;
}

const ChatTemplate::Variant& ChatTemplate::variantFor(bool request_has_tools) const {
    if (request_has_tools) {
        for (const Variant& variant : variants_) {
            if (variant.name == "tool_use") return variant;
        }
    }
    return variants_.front();
}

// Renders one user message without and with a tool: a template that puts
// tool definitions in the prompt renders the two differently.
void ChatTemplate::probeTools() {
    jinja::Arena arena;
    ChatRequest request;
    ChatMessage message;
    message.role = "user";
    message.content_null = false;
    message.content_is_string = true;
    message.parts.push_back({ChatContentPart::Kind::text, "What is the weather in Paris?"});
    request.messages.push_back(message);
    std::string without;
    if (auto error = renderChatPrompt(*this, request, arena, without, {})) {
        probe_error_ = error->message;
        return;
    }
    jinja::DictBuilder properties(arena);
    jinja::DictBuilder city(arena);
    city.set("type", jinja::Value::string("string"));
    properties.set("city", city.finish());
    jinja::DictBuilder parameters(arena);
    parameters.set("type", jinja::Value::string("object"));
    parameters.set("properties", properties.finish());
    jinja::DictBuilder function(arena);
    function.set("name", jinja::Value::string("dpgate_probe_get_weather"));
    function.set("description", jinja::Value::string("Get the weather of a city."));
    function.set("parameters", parameters.finish());
    jinja::DictBuilder tool(arena);
    tool.set("type", jinja::Value::string("function"));
    tool.set("function", function.finish());
    jinja::ListBuilder tools(arena);
    tools.push(tool.finish());
    request.tools = tools.finish();
    std::string with;
    if (auto error = renderChatPrompt(*this, request, arena, with, {})) {
        probe_error_ = error->message;
        return;
    }
    renders_tools_ = with != without;
}

}  // namespace dpgate::admission
