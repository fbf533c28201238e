#include "prompt_digest.hpp"

#include <cstring>

#include <simdjson.h>

#include "prompt_hasher.hpp"

namespace dpgate::sim {

namespace {

namespace dom = simdjson::dom;

// A parser keeps its buffers between requests; huge bodies get a throwaway
// parser so one 1 GiB request does not pin gigabytes per thread forever.
constexpr std::size_t kReusableParserBytes = 16 << 20;

bool feedContentPart(dom::element part, PromptHasher& hasher, std::string& error) {
    dom::object object;
    if (part.get_object().get(object)) {
        error = "content parts must be objects";
        return false;
    }
    std::string_view type;
    if (object["type"].get_string().get(type)) {
        error = "content part needs a string \"type\"";
        return false;
    }
    if (type == "text" || type == "input_text" || type == "output_text") {
        std::string_view text;
        if (object["text"].get_string().get(text)) {
            error = "text content part needs a string \"text\"";
            return false;
        }
        hasher.feed(text);
        return true;
    }
    if (type == "image_url" || type == "input_image") {
        // {"image_url":{"url":...}} (chat) or {"image_url":"..."} (responses).
        dom::element image;
        std::string_view url;
        if (!object["image_url"].get(image) && image.get_string().get(url)) {
            if (image["url"].get_string().get(url)) url = {};
        }
        if (url.empty() && object["file_id"].get_string().get(url)) url = {};
        hasher.feedImage(url);
        return true;
    }
    // Other part types (audio, files) carry no text the simulator counts.
    return true;
}

bool feedMessages(dom::element messages_value, PromptHasher& hasher, std::string& last_role, std::string& error) {
    dom::array messages;
    if (messages_value.get_array().get(messages)) {
        error = "\"messages\" must be a list";
        return false;
    }
    for (dom::element message_value : messages) {
        dom::object message;
        if (message_value.get_object().get(message)) {
            error = "each message must be an object";
            return false;
        }
        std::string_view role;
        if (message["role"].get_string().get(role)) {
            error = "each message needs a string \"role\"";
            return false;
        }
        last_role.assign(role);
        hasher.feed(role);
        hasher.feed("\n");
        dom::element content;
        if (!message["content"].get(content)) {
            std::string_view text;
            dom::array parts;
            if (!content.get_string().get(text)) {
                hasher.feed(text);
            } else if (!content.get_array().get(parts)) {
                for (dom::element part : parts) {
                    if (!feedContentPart(part, hasher, error)) return false;
                }
            } else if (!content.is_null()) {
                error = "message \"content\" must be a string, a list of parts or null";
                return false;
            }
        }
        dom::element tool_calls;
        if (!message["tool_calls"].get(tool_calls) && !tool_calls.is_null()) {
            hasher.feed(simdjson::minify(tool_calls));
        }
    }
    return true;
}

bool feedPrompt(dom::element prompt, PromptHasher& hasher, std::string& error) {
    std::string_view text;
    if (!prompt.get_string().get(text)) {
        hasher.feed(text);
        return true;
    }
    dom::array items;
    if (prompt.get_array().get(items)) {
        error = "\"prompt\" must be a string, a list of strings or a list of token ids";
        return false;
    }
    for (dom::element item : items) {
        std::int64_t token_id = 0;
        if (!item.get_string().get(text)) {
            hasher.feed(text);
        } else if (!item.get_int64().get(token_id)) {
            char unit[PromptHasher::kTokenBytes];
            std::memcpy(unit, &token_id, sizeof unit);
            hasher.feed(std::string_view(unit, sizeof unit));
        } else if (item.is_array()) {
            if (!feedPrompt(item, hasher, error)) return false;
        } else {
            error = "\"prompt\" list items must be strings or token ids";
            return false;
        }
    }
    return true;
}

bool readMaxTokens(dom::object request, PromptDigest& digest, std::string& error) {
    for (const char* key : {"max_completion_tokens", "max_tokens"}) {
        dom::element value;
        if (request[key].get(value) || value.is_null()) continue;
        std::int64_t tokens = 0;
        if (value.get_int64().get(tokens)) {
            error = std::string("\"") + key + "\" must be an integer";
            return false;
        }
        if (tokens < 1) {
            error = "max_tokens must be at least 1, got " + std::to_string(tokens) + ".";
            return false;
        }
        digest.max_tokens = static_cast<std::uint64_t>(tokens);
        return true;
    }
    return true;
}

bool digestWith(dom::parser& parser, std::string_view body, ApiKind kind, PromptDigest& digest, std::string& error) {
    dom::element root;
    if (auto code = parser.parse(body.data(), body.size()).get(root)) {
        error = std::string("Malformed JSON in request body: ") + simdjson::error_message(code);
        return false;
    }
    dom::object request;
    if (root.get_object().get(request)) {
        error = "The request body must be a JSON object.";
        return false;
    }
    if (!readMaxTokens(request, digest, error)) return false;
    bool flag = false;
    if (!request["stream"].get_bool().get(flag)) digest.stream = flag;
    if (!request["stream_options"]["include_usage"].get_bool().get(flag)) digest.include_usage = flag;

    PromptHasher hasher;
    if (kind == ApiKind::kChat) {
        dom::element tools_value;
        dom::array tools;
        bool has_tools = !request["tools"].get(tools_value) && !tools_value.get_array().get(tools) && tools.size() > 0;
        if (has_tools) hasher.feed(simdjson::minify(tools_value));
        dom::element messages;
        if (request["messages"].get(messages)) {
            error = "\"messages\" is required";
            return false;
        }
        std::string last_role;
        if (!feedMessages(messages, hasher, last_role, error)) return false;
        if (has_tools && last_role == "user") {
            std::string_view name;
            if (tools.at(0)["function"]["name"].get_string().get(name)) name = "tool";
            digest.tool_call_name = std::string(name);
        }
    } else {
        dom::element prompt;
        if (request["prompt"].get(prompt)) {
            error = "\"prompt\" is required";
            return false;
        }
        if (!feedPrompt(prompt, hasher, error)) return false;
    }
    digest.prompt_tokens = hasher.promptTokens();
    digest.text_seed = hasher.digest();
    digest.block_hashes = hasher.takeBlockHashes();
    return true;
}

}  // namespace

bool digestRequest(std::string_view body, ApiKind kind, PromptDigest& digest, std::string& error) {
    if (body.size() > kReusableParserBytes) {
        dom::parser parser;
        return digestWith(parser, body, kind, digest, error);
    }
    thread_local dom::parser parser;
    return digestWith(parser, body, kind, digest, error);
}

}  // namespace dpgate::sim
