#include "admission/template/vllm_render.hpp"

#include <algorithm>
#include <optional>

#include "admission/template/deepseek_v3_fast_path.hpp"
#include "admission/template/jinja/py_text.hpp"

namespace dpgate::admission {

namespace {

using jinja::DictBuilder;
using jinja::ListBuilder;
using jinja::Value;

// transformers' marker for continue_final_message: appended to the last
// message's content, rendered, and the prompt cut where it lands.
constexpr std::string_view kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";

Value joinedText(const ChatMessage& message, jinja::Arena& arena) {
    std::size_t count = 0;
    std::size_t bytes = 0;
    message.forEachText([&](std::string_view text) {
        ++count;
        bytes += text.size();
    });
    if (count == 1) {
        Value single;
        message.forEachText([&](std::string_view text) { single = Value::string(text); });
        return single;
    }
    if (count == 0) return Value::string({});
    char* out = static_cast<char*>(arena.allocate(bytes + count - 1, 1));
    std::size_t at = 0;
    bool first = true;
    message.forEachText([&](std::string_view text) {
        if (!first) out[at++] = '\n';
        first = false;
        std::copy(text.begin(), text.end(), out + at);
        at += text.size();
    });
    return Value::string({out, at});
}

Value partsList(const ChatMessage& message, jinja::Arena& arena) {
    ListBuilder list(arena, message.parts.size());
    for (const ChatContentPart& part : message.parts) {
        DictBuilder dict(arena, 2);
        if (part.kind == ChatContentPart::Kind::text) {
            dict.set("type", Value::string("text"));
            dict.set("text", Value::string(part.text));
        } else {
            dict.set("type", Value::string("image"));
        }
        list.push(dict.finish());
    }
    return list.finish();
}

// A string with `suffix` appended, in the arena.
Value appended(std::string_view text, std::string_view suffix, jinja::Arena& arena) {
    char* out = static_cast<char*>(arena.allocate(text.size() + suffix.size(), 1));
    std::copy(text.begin(), text.end(), out);
    std::copy(suffix.begin(), suffix.end(), out + text.size());
    return Value::string({out, text.size() + suffix.size()});
}

// The last message's content with the continue marker appended; the
// content must have text (transformers refuses otherwise).
std::optional<Value> withContinueTag(const Value& content, jinja::Arena& arena) {
    if (content.isString()) return appended(content.text(), kContinueTag, arena);
    if (!content.isList()) return std::nullopt;
    const jinja::ListData& parts = content.asList();
    for (std::size_t i = parts.size; i-- > 0;) {
        const Value& part = parts.items[i];
        if (!part.isDict()) continue;
        const Value* text = part.asDict().find("text");
        if (text == nullptr || !text->isString()) continue;
        ListBuilder copy(arena, parts.size);
        for (std::size_t k = 0; k < parts.size; ++k) {
            if (k != i) {
                copy.push(parts.items[k]);
                continue;
            }
            DictBuilder dict(arena, part.asDict().size);
            for (std::size_t j = 0; j < part.asDict().size; ++j) {
                const bool is_text = part.asDict().keys[j].isString() && part.asDict().keys[j].text() == "text";
                dict.set(part.asDict().keys[j],
                         is_text ? appended(text->text(), kContinueTag, arena) : part.asDict().values[j]);
            }
            copy.push(dict.finish());
        }
        return copy.finish();
    }
    return std::nullopt;
}

// merge_kwargs: `overrides` win, except their None and "auto" values.
bool unset(const Value& v) { return v.isNone() || v.isUndefined() || (v.isString() && v.text() == "auto"); }

// Whether a chat_template_kwargs entry sets a variable the template reads
// (beyond those the request's own fields override).
bool kwargsReachTemplate(const ChatRequest& request, const jinja::Template& tpl) {
    if (!request.chat_template_kwargs.isDict()) return false;
    const jinja::DictData& kwargs = request.chat_template_kwargs.asDict();
    for (std::size_t i = 0; i < kwargs.size; ++i) {
        if (!kwargs.keys[i].isString() || unset(kwargs.values[i])) continue;
        const std::string_view name = kwargs.keys[i].text();
        if (name == "add_generation_prompt" || name == "continue_final_message") continue;
        if (tpl.nameId(name) != jinja::Template::kNoName) return true;
    }
    return false;
}

}  // namespace

Value conversationValue(const ChatRequest& request, ContentFormat format, jinja::Arena& arena) {
    ListBuilder messages(arena, request.messages.size());
    for (const ChatMessage& message : request.messages) {
        DictBuilder dict(arena, 6);
        dict.set("role", Value::string(message.role));
        Value content = format == ContentFormat::openai ? partsList(message, arena) : joinedText(message, arena);
        if (message.role == "tool" && format == ContentFormat::openai && message.images == 0) {
            content = joinedText(message, arena);  // vLLM flattens a tool result made only of text
        }
        dict.set("content", content);
        if (message.role == "assistant") {
            if (message.has_tool_calls) dict.set("tool_calls", message.tool_calls);
            if (message.has_reasoning) {
                dict.set("reasoning", Value::string(message.reasoning));
                dict.set("reasoning_content", Value::string(message.reasoning));
            }
        } else if (message.role == "tool" && message.has_tool_call_id) {
            dict.set("tool_call_id", message.tool_call_id);
        }
        if (message.has_name) dict.set("name", Value::string(message.name));
        if (message.role == "developer") dict.set("tools", Value::none());
        messages.push(dict.finish());
    }
    return messages.finish();
}

jinja::Renderer& PromptRenderers::get(const jinja::Template& tpl, jinja::Arena& arena) {
    for (Entry& entry : entries_) {
        if (entry.tpl == &tpl && entry.arena == &arena) return *entry.renderer;
    }
    entries_.push_back({&tpl, &arena, std::make_unique<jinja::Renderer>(tpl, arena)});
    return *entries_.back().renderer;
}

std::optional<PromptRenderError> renderChatPrompt(const ChatTemplate& chat_template, const ChatRequest& request,
                                                  jinja::Arena& arena, std::string& prompt,
                                                  const PromptRenderOptions& options, PromptRenderers* renderers) {
    const ChatTemplate::Variant& variant = chat_template.variantFor(!request.tools.isNone());
    if (options.fast_path && variant.deepseek_v3_fast_path && !request.continue_final_message &&
        !kwargsReachTemplate(request, *variant.tpl)) {
        std::string_view bos;
        for (const auto& [name, text] : chat_template.specialTokens()) {
            if (name == "bos_token") bos = text;
        }
        renderDeepSeekV3(request, bos, prompt);
        return std::nullopt;
    }
    Value messages = conversationValue(request, variant.content_format, arena);

    std::string_view final_text;  // the last message's text before the marker
    if (request.continue_final_message) {
        const jinja::ListData& list = messages.asList();
        const Value* content = list.size == 0 ? nullptr : list.items[list.size - 1].asDict().find("content");
        if (content != nullptr && content->isString()) {
            final_text = content->text();
        } else if (content != nullptr && content->isList()) {
            for (std::size_t i = content->asList().size; i-- > 0;) {
                const Value& part = content->asList().items[i];
                const Value* text = part.isDict() ? part.asDict().find("text") : nullptr;
                if (text != nullptr && text->isString()) {
                    final_text = text->text();
                    break;
                }
            }
        }
        std::optional<Value> tagged = content == nullptr ? std::nullopt : withContinueTag(*content, arena);
        if (!tagged) {
            return PromptRenderError{"continue_final_message",
                                     "continue_final_message is set but we could not find any text to continue in the "
                                     "final message!",
                                     false};
        }
        if (variant.tpl->source().find("content") == std::string::npos) {
            return PromptRenderError{"continue_final_message",
                                     "continue_final_message is set but the chat template never reads message content",
                                     false};
        }
        // The messages list is immutable: rebuild its last dict with the tagged content.
        ListBuilder copy(arena, list.size);
        for (std::size_t i = 0; i + 1 < list.size; ++i) copy.push(list.items[i]);
        const jinja::DictData& last = list.items[list.size - 1].asDict();
        DictBuilder dict(arena, last.size);
        for (std::size_t j = 0; j < last.size; ++j) {
            const bool is_content = last.keys[j].isString() && last.keys[j].text() == "content";
            dict.set(last.keys[j], is_content ? *tagged : last.values[j]);
        }
        copy.push(dict.finish());
        messages = copy.finish();
    }

    std::optional<jinja::Renderer> own;
    jinja::Renderer& renderer =
        renderers != nullptr ? renderers->get(*variant.tpl, arena) : own.emplace(*variant.tpl, arena);
    renderer.reset();
    renderer.setLimits(options.limits);
    renderer.setNow(options.now_unix_seconds);
    const ChatTemplate::Variant::Ids& ids = variant.ids;
    // transformers: {**special_tokens_map, **kwargs}, with messages, tools,
    // documents and add_generation_prompt passed beside them.
    for (std::size_t i = 0; i < ids.special_tokens.size(); ++i) {
        renderer.setVariable(ids.special_tokens[i], Value::string(chat_template.specialTokens()[i].second));
    }
    if (!chat_template.additionalSpecialTokens().empty() && ids.additional_special_tokens != jinja::Template::kNoName) {
        ListBuilder extra(arena, chat_template.additionalSpecialTokens().size());
        for (const std::string& token : chat_template.additionalSpecialTokens()) extra.push(Value::string(token));
        renderer.setVariable(ids.additional_special_tokens, extra.finish());
    }
    Value tools = request.tools;
    Value documents = request.documents;
    bool add_generation_prompt = request.add_generation_prompt;
    if (request.chat_template_kwargs.isDict()) {
        const jinja::DictData& kwargs = request.chat_template_kwargs.asDict();
        for (std::size_t i = 0; i < kwargs.size; ++i) {
            const Value& value = kwargs.values[i];
            if (!kwargs.keys[i].isString() || unset(value)) continue;
            const std::string_view name = kwargs.keys[i].text();
            // The request's own fields override these kwargs (vLLM's build_chat_params).
            if (name == "add_generation_prompt" || name == "continue_final_message") continue;
            if (name == "documents" && !request.documents.isNone()) continue;
            if (name == "reasoning_effort" && !request.reasoning_effort.isNone()) continue;
            if (name == "tools") {
                tools = value;
                continue;
            }
            if (name == "documents") {
                documents = value;
                continue;
            }
            renderer.setVariable(name, value);
        }
    }
    if (!request.reasoning_effort.isNone()) {
        renderer.setVariable(ids.reasoning_effort, request.reasoning_effort);
        const bool user_set = request.chat_template_kwargs.isDict() &&
                              request.chat_template_kwargs.asDict().find("enable_thinking") != nullptr;
        if (!user_set)
            renderer.setVariable(ids.enable_thinking, Value::boolean(request.reasoning_effort.text() != "none"));
    }
    renderer.setVariable(ids.messages, messages);
    renderer.setVariable(ids.tools, tools);
    renderer.setVariable(ids.documents, documents);
    renderer.setVariable(ids.add_generation_prompt, Value::boolean(add_generation_prompt));

    const std::size_t start = prompt.size();
    if (auto error = renderer.render(prompt)) {
        return PromptRenderError{"messages", std::move(error->message), error->limit};
    }
    if (request.continue_final_message) {
        const std::string_view rendered = std::string_view(prompt).substr(start);
        const std::string_view tag = jinja::pyStrip(kContinueTag);
        const std::size_t at = rendered.rfind(tag);
        if (at == std::string_view::npos || rendered.find(jinja::pyStrip(final_text)) == std::string_view::npos) {
            prompt.resize(start);
            return PromptRenderError{"continue_final_message",
                                     "continue_final_message is set but the final message does not appear in the chat "
                                     "after applying the chat template! This can happen if the chat template deletes "
                                     "portions of the final message.",
                                     false};
        }
        const bool spacing_kept = rendered.substr(at, kContinueTag.size()) == kContinueTag;
        prompt.resize(start + at);
        if (!spacing_kept) prompt.resize(start + jinja::pyRstrip(std::string_view(prompt).substr(start)).size());
    }
    return std::nullopt;
}

}  // namespace dpgate::admission
