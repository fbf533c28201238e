#include "admission/request_scan.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "admission/clip_json_path.hpp"
#include "admission/json_depth_within.hpp"
#include "admission/json_grammar.hpp"
#include "admission/json_validator.hpp"
#include "admission/simdjson_structurals.hpp"
#include "admission/template/jinja/py_json.hpp"
#include "admission/tokenizer/utf8.hpp"
#include "common/api_error.hpp"
#include "common/fast_paths.hpp"

namespace dpgate::admission {

namespace od = simdjson::ondemand;

namespace {

// A parser sized for a 128 MB body keeps its (mostly untouched) buffers;
// drop them when much smaller bodies follow.
constexpr std::size_t kShrinkAboveBytes = 32u << 20;

// A JSON path ("messages[3].content[1].image_url"), rendered to text only
// when an error names it: building it per field would cost a heap string
// per message on every request.
class Path {
public:
    Path(const char* root) : key_(root) {}       // NOLINT(google-explicit-constructor): literals name top-level fields
    Path(std::string_view root) : key_(root) {}  // NOLINT(google-explicit-constructor)
    Path field(std::string_view key) const { return Path(this, key, 0, false); }
    Path index(std::size_t i) const { return Path(this, {}, i, true); }
    // Clipped to kMaxJsonPathBytes (clipJsonPath), each key to kMaxJsonPathKeyBytes.
    std::string str() const {
        std::vector<const Path*> chain;
        for (const Path* p = this; p != nullptr; p = p->parent_) chain.push_back(p);
        std::string out;
        for (auto it = chain.rbegin(); it != chain.rend() && out.size() <= kMaxJsonPathBytes; ++it) {
            const Path& segment = **it;
            if (segment.is_index_) {
                out += "[" + std::to_string(segment.index_) + "]";
            } else {
                if (segment.parent_ != nullptr) out += '.';
                out += clipUtf8(segment.key_, kMaxJsonPathKeyBytes);
            }
        }
        return clipJsonPath(std::move(out));
    }

private:
    Path(const Path* parent, std::string_view key, std::size_t index, bool is_index)
        : parent_(parent), key_(key), index_(index), is_index_(is_index) {}
    const Path* parent_ = nullptr;  // lives on a caller's stack frame, longer than this
    std::string_view key_;
    std::size_t index_ = 0;
    bool is_index_ = false;
};

ScanError fail(const Path& path, std::string_view what) {
    ScanError error;
    error.param = path.str();
    error.message = error.param + ": " + std::string(what);
    return error;
}

ScanError jsonError(const Path& path, simdjson::error_code code) {
    switch (code) {
        case simdjson::STRING_ERROR: return fail(path, "invalid string (a lone surrogate or a bad escape)");
        case simdjson::DEPTH_ERROR: return fail(path, "JSON nested too deeply");
        case simdjson::UNESCAPED_CHARS: return fail(path, "invalid string (unescaped control character)");
        case simdjson::UNCLOSED_STRING: return fail(path, "malformed JSON (unclosed string)");
        case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
        case simdjson::TAPE_ERROR: return fail(path, "malformed JSON (truncated, unbalanced or trailing content)");
        default: return fail(path, std::string("malformed JSON (") + simdjson::error_message(code) + ")");
    }
}

ScanError faultError(const JsonFault& fault, std::uint32_t max_depth) {
    ScanError error;
    error.param = fault.path.empty() ? "body" : fault.path;  // clipped by the validator
    switch (fault.kind) {
        case JsonFault::Kind::empty: error.message = "empty (expected a JSON object)"; break;
        case JsonFault::Kind::invalid_utf8:
            error.message = "is not valid UTF-8 (byte offset " + std::to_string(fault.offset) + ")";
            break;
        case JsonFault::Kind::too_deep:
            error.message = "nests deeper than " + std::to_string(max_depth) + " levels (limits.max_json_depth)";
            break;
        case JsonFault::Kind::syntax:
            error.message = std::string(fault.what) + " at byte offset " + std::to_string(fault.offset);
            break;
    }
    error.message = error.param + ": " + error.message;
    return error;
}

std::string_view trimmed(std::string_view text) {
    while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r' || text.back() == '\t')) {
        text.remove_suffix(1);
    }
    return text;
}

// On Demand's type() looks at a value's first byte only: a null (the one
// literal some readers take without reading it) is checked whole here.
std::optional<ScanError> typeOf(od::value& value, const Path& path, od::json_type& type) {
    if (auto error = value.type().get(type)) return jsonError(path, error);
    if (type == od::json_type::null) {
        bool null = false;
        if (auto error = value.is_null().get(null)) return jsonError(path, error);
        if (!null) return fail(path, "malformed JSON (invalid literal: expected true, false or null)");
    }
    return std::nullopt;
}

// Calls on_member(key, value) for each member of the object `source` holds
// (an od::value or the od::document), in order, and returns the first
// refusal on_member returns. `path` is the object's: it names an error in
// the object's own syntax.
template <typename Source, typename OnMember>
std::optional<ScanError> forEachMember(Source& source, const Path& path, OnMember&& on_member) {
    od::object object;
    if (auto error = source.get_object().get(object)) return jsonError(path, error);
    for (auto field_result : object) {
        od::field field;
        if (auto error = std::move(field_result).get(field)) return jsonError(path, error);
        std::string_view key;
        if (auto error = field.unescaped_key().get(key)) return jsonError(path, error);
        od::value value = field.value();
        if (auto refusal = on_member(key, value)) return refusal;
    }
    return std::nullopt;
}

// Calls on_element(element, element_path) for each element of the array
// `value` holds, in order, and returns the first refusal on_element
// returns. `*count` (when given) receives the number of elements, once all
// are read.
template <typename OnElement>
std::optional<ScanError> forEachElement(od::value& value, const Path& path, OnElement&& on_element,
                                        std::size_t* count = nullptr) {
    od::array array;
    if (auto error = value.get_array().get(array)) return jsonError(path, error);
    std::size_t index = 0;
    for (auto element_result : array) {
        const Path element_path = path.index(index);
        od::value element;
        if (auto error = std::move(element_result).get(element)) return jsonError(element_path, error);
        if (auto refusal = on_element(element, element_path)) return refusal;
        ++index;
    }
    if (count != nullptr) *count = index;
    return std::nullopt;
}

// A value no reader uses, checked as JSON all the same: On Demand would
// skip it unread (NaN, [1,,2] and bad escapes reached the backend). The
// fast JSON validation relies on every skipped value passing through here.
std::optional<ScanError> checkUnread(od::value& value, const Path& path) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    std::string_view raw;
    if (type == od::json_type::object) {
        od::object object;
        if (auto error = value.get_object().get(object)) return jsonError(path, error);
        if (auto error = object.raw_json().get(raw)) return jsonError(path, error);
    } else if (type == od::json_type::array) {
        od::array array;
        if (auto error = value.get_array().get(array)) return jsonError(path, error);
        if (auto error = array.raw_json().get(raw)) return jsonError(path, error);
    } else {
        raw = trimmed(value.raw_json_token());
        // A string (a base64 image: megabytes): stage 1 has found its closing
        // quote and checked it holds no control character; its escapes are left.
        if (type == od::json_type::string) {
            if (raw.size() < 2 || raw.back() != '"' ||
                !json_grammar::escapesValid(raw.data() + 1, raw.data() + raw.size() - 1)) {
                return fail(path, "malformed JSON");
            }
            // Consumed, not left to On Demand's skip: a string followed by ':'
            // would be skipped as a key, and the rest of its object with it.
            od::raw_json_string consumed;
            if (auto error = value.get_raw_json_string().get(consumed)) return jsonError(path, error);
            return std::nullopt;
        }
    }
    // Stage 1 has checked UTF-8, and jsonDepthWithin the depth. One scratch
    // stack per thread (one Admitter per thread), at most kMaxJsonDepthCap levels.
    thread_local JsonValidator validator;
    JsonValidation options;
    options.max_depth = kMaxJsonDepthCap;
    options.check_utf8 = false;
    if (validator.validate(trimmed(raw), options)) return fail(path, "malformed JSON");
    return std::nullopt;
}

std::optional<ScanError> readString(od::value& value, const Path& path, std::string_view& out) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type != od::json_type::string) return fail(path, "must be a string");
    if (auto error = value.get_string().get(out)) return jsonError(path, error);
    return std::nullopt;
}

// Null leaves `out` untouched and sets `present` false.
std::optional<ScanError> readOptionalString(od::value& value, const Path& path, std::string_view& out, bool& present) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    present = type != od::json_type::null;
    if (!present) return std::nullopt;
    return readString(value, path, out);
}

std::optional<ScanError> readOptionalBool(od::value& value, const Path& path, bool& out) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::null) return std::nullopt;
    if (type != od::json_type::boolean) return fail(path, "must be a boolean");
    if (auto error = value.get_bool().get(out)) return jsonError(path, error);
    return std::nullopt;
}

bool isIntegerText(std::string_view text) {
    if (!text.empty() && text.front() == '-') text.remove_prefix(1);
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Integers only: 100.0, 1e3, "100", true and null are refused by name.
std::optional<ScanError> readInteger(od::value& value, const Path& path, ScannedInteger& out) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type != od::json_type::number) return fail(path, "must be an integer");
    out.text = trimmed(value.raw_json_token());
    // On Demand's type() looked at the first byte only (01 and 1.2.3 start with a digit).
    if (json_grammar::numberEnd(out.text.data(), out.text.data() + out.text.size()) !=
        out.text.data() + out.text.size()) {
        return fail(path, "malformed JSON (invalid number)");
    }
    out.present = true;
    std::int64_t parsed = 0;
    const auto error = value.get_int64().get(parsed);
    if (!error) {
        out.value = parsed;
        return std::nullopt;
    }
    // 2^64 and beyond: an integer, just out of every range the rules allow.
    if (isIntegerText(out.text)) {
        out.fits_int64 = false;
        return std::nullopt;
    }
    return fail(path, "must be an integer, not " + std::string(clipUtf8(out.text, 40)));
}

// An image part's image_url: a string, or an object whose url is a string.
// The URL (often megabytes of base64) is type-checked and skipped, never read.
std::optional<ScanError> checkImageUrl(od::value& value, const Path& path) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::string) return checkUnread(value, path);
    if (type != od::json_type::object) return fail(path, "must be an object with a string url");
    bool has_url = false;
    auto error =
        forEachMember(value, path, [&](std::string_view key, od::value& field_value) -> std::optional<ScanError> {
            if (key != "url") return checkUnread(field_value, path.field(key));
            od::json_type url_type;
            if (auto error = typeOf(field_value, path.field("url"), url_type)) return error;
            if (url_type != od::json_type::string) return fail(path.field("url"), "must be a string");
            if (auto error = checkUnread(field_value, path.field("url"))) return error;
            has_url = true;
            return std::nullopt;
        });
    if (error) return error;
    if (!has_url) return fail(path.field("url"), "missing (an image part needs image_url.url)");
    return std::nullopt;
}

// Any JSON value as Python's json.loads makes it (vLLM's tools, template
// kwargs, tool-call arguments sent as objects): a repeated key keeps its
// first position and its last value; numbers are ints or floats as Python
// reads them. `levels_left` arrays and objects may still open, this value
// included: the whole body was validated to limits.max_json_depth before
// any reader ran, so this stop only makes the recursion bounded by itself.
std::optional<ScanError> readJsonValue(od::value& value, const Path& path, jinja::Arena& arena, jinja::Value& out,
                                       std::uint32_t levels_left) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if ((type == od::json_type::array || type == od::json_type::object) && levels_left == 0) {
        return fail(path, "nests deeper than " + std::to_string(kMaxJsonDepthCap) + " levels");
    }
    switch (type) {
        case od::json_type::null: out = jinja::Value::none(); return std::nullopt;
        case od::json_type::boolean: {
            bool b = false;
            if (auto error = value.get_bool().get(b)) return jsonError(path, error);
            out = jinja::Value::boolean(b);
            return std::nullopt;
        }
        case od::json_type::number: {
            // The token as written: On Demand's type() looked at its first byte only.
            const std::string_view number = trimmed(value.raw_json_token());
            if (json_grammar::numberEnd(number.data(), number.data() + number.size()) != number.data() + number.size())
                return fail(path, "malformed JSON (invalid number)");
            out = jinja::pyJsonNumber(number, arena);
            return std::nullopt;
        }
        case od::json_type::string: {
            std::string_view text;
            if (auto error = value.get_string().get(text)) return jsonError(path, error);
            out = jinja::Value::string(text);
            return std::nullopt;
        }
        case od::json_type::array: {
            jinja::ListBuilder list(arena);
            auto error = forEachElement(
                value, path, [&](od::value& element, const Path& element_path) -> std::optional<ScanError> {
                    jinja::Value item;
                    if (auto error = readJsonValue(element, element_path, arena, item, levels_left - 1)) return error;
                    list.push(item);
                    return std::nullopt;
                });
            if (error) return error;
            out = list.finish();
            return std::nullopt;
        }
        case od::json_type::object: {
            jinja::DictBuilder dict(arena);
            auto error = forEachMember(
                value, path, [&](std::string_view key, od::value& field_value) -> std::optional<ScanError> {
                    jinja::Value item;
                    if (auto error = readJsonValue(field_value, path.field(key), arena, item, levels_left - 1))
                        return error;
                    dict.set(key, item);
                    return std::nullopt;
                });
            if (error) return error;
            out = dict.finish();
            return std::nullopt;
        }
        default: return fail(path, "unexpected JSON value");
    }
}

// Part types whose text vLLM renders, and the key holding it.
std::optional<std::string_view> textKeyOf(std::string_view part_type) {
    if (part_type == "text" || part_type == "input_text" || part_type == "output_text") return "text";
    if (part_type == "refusal") return "refusal";
    if (part_type == "thinking") return "thinking";
    return std::nullopt;
}

std::optional<ScanError> readContentPart(od::value& value, const Path& path, ChatMessage& message) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::string) {  // vLLM takes a bare string as a text part
        std::string_view text;
        if (auto error = value.get_string().get(text)) return jsonError(path, error);
        message.parts.push_back({ChatContentPart::Kind::text, text});
        return std::nullopt;
    }
    if (type != od::json_type::object) return fail(path, "must be an object");
    std::string_view part_type;
    bool has_type = false;
    // Text of the keys a text-like part may carry; which one counts depends on the type.
    std::string_view texts[3];
    bool has_text[3] = {false, false, false};
    constexpr std::string_view kTextKeys[3] = {"text", "refusal", "thinking"};
    bool has_image_url = false;
    auto error =
        forEachMember(value, path, [&](std::string_view key, od::value& field_value) -> std::optional<ScanError> {
            if (key == "type") {
                if (auto error = readString(field_value, path.field("type"), part_type)) return error;
                has_type = true;
                return std::nullopt;
            }
            if (key == "image_url") {
                if (auto error = checkImageUrl(field_value, path.field("image_url"))) return error;
                has_image_url = true;
                return std::nullopt;
            }
            const auto k = static_cast<std::size_t>(std::find(kTextKeys, kTextKeys + 3, key) - kTextKeys);
            if (k == 3) return checkUnread(field_value, path.field(key));
            od::json_type text_type;
            if (auto error = typeOf(field_value, path.field(key), text_type)) return error;
            if (text_type == od::json_type::null) return std::nullopt;
            if (text_type != od::json_type::string) return fail(path.field(key), "must be a string");
            if (auto error = field_value.get_string().get(texts[k])) return jsonError(path.field(key), error);
            has_text[k] = true;
            return std::nullopt;
        });
    if (error) return error;
    if (!has_type) return fail(path.field("type"), "missing");
    if (auto text_key = textKeyOf(part_type)) {
        const std::size_t k = *text_key == "text" ? 0 : *text_key == "refusal" ? 1 : 2;
        // vLLM skips a text part whose text is missing or null.
        if (has_text[k]) message.parts.push_back({ChatContentPart::Kind::text, texts[k]});
    } else if (part_type == "image_url" || part_type == "input_image") {
        if (!has_image_url) return fail(path.field("image_url"), "missing (an image part needs image_url.url)");
        message.parts.push_back({ChatContentPart::Kind::image, {}});
        ++message.images;
    } else {
        return fail(path.field("type"),
                    "unsupported content part \"" + std::string(clipUtf8(part_type, 40)) +
                        "\" (supported: text, input_text, output_text, refusal, thinking, image_url, "
                        "input_image)");
    }
    return std::nullopt;
}

std::optional<ScanError> readContent(od::value& value, const Path& path, ChatMessage& message) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    message.parts.clear();
    message.images = 0;
    message.content_is_string = false;
    message.content_null = type == od::json_type::null;
    if (message.content_null) return std::nullopt;
    if (type == od::json_type::string) {
        std::string_view text;
        if (auto error = value.get_string().get(text)) return jsonError(path, error);
        message.parts.push_back({ChatContentPart::Kind::text, text});
        message.content_is_string = true;
        return std::nullopt;
    }
    if (type != od::json_type::array) return fail(path, "must be a string, an array of parts or null");
    return forEachElement(value, path, [&](od::value& element, const Path& element_path) {
        return readContentPart(element, element_path, message);
    });
}

// A tool call's `arguments` as vLLM passes it to the template: a JSON string
// parsed with json.loads ({} when it is not JSON), an object or array as
// sent, anything else {}.
std::optional<ScanError> readArguments(od::value& value, const Path& path, jinja::Arena& arena, jinja::Value& out) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::string) {
        std::string_view text;
        if (auto error = value.get_string().get(text)) return jsonError(path, error);
        // json.loads("5") is 5, and vLLM keeps it; what is not JSON becomes {}.
        if (auto error = jinja::pyJsonLoads(text, arena, out)) {
            // Python's recursion limit is not a JSONDecodeError: the backend would fail the request.
            if (error->too_deep) return fail(path, "JSON nested too deeply (more than 512 levels)");
            out = jinja::DictBuilder(arena).finish();
        }
        return std::nullopt;
    }
    if (type == od::json_type::object || type == od::json_type::array)
        return readJsonValue(value, path, arena, out, kMaxJsonDepthCap);
    out = jinja::DictBuilder(arena).finish();
    // A value of another type is still validated as JSON by the scan.
    jinja::Value ignored;
    return readJsonValue(value, path, arena, ignored, kMaxJsonDepthCap);
}

std::optional<ScanError> readFunction(od::value& value, const Path& path, jinja::Arena& arena, jinja::Value& out) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type != od::json_type::object) return fail(path, "must be an object");
    bool has_name = false;
    std::string_view name;
    bool has_arguments = false;
    jinja::Value arguments;
    auto error =
        forEachMember(value, path, [&](std::string_view key, od::value& field_value) -> std::optional<ScanError> {
            if (key == "name") {
                if (auto error = readString(field_value, path.field("name"), name)) return error;
                has_name = true;
            } else if (key == "arguments") {
                if (auto error = readArguments(field_value, path.field("arguments"), arena, arguments)) return error;
                has_arguments = true;
            } else {
                return checkUnread(field_value, path.field(key));
            }
            return std::nullopt;
        });
    if (error) return error;
    if (!has_name) return fail(path.field("name"), "must be a string");
    // pydantic rebuilds the function in its fields' order: arguments, name.
    jinja::DictBuilder function(arena, 2);
    function.set("arguments", has_arguments ? arguments : jinja::DictBuilder(arena).finish());
    function.set("name", jinja::Value::string(name));
    out = function.finish();
    return std::nullopt;
}

std::optional<ScanError> readToolCall(od::value& value, const Path& path, jinja::Arena& arena, jinja::Value& out) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type != od::json_type::object) return fail(path, "must be an object");
    jinja::Value id;
    jinja::Value function;
    jinja::Value call_type;
    auto error =
        forEachMember(value, path, [&](std::string_view key, od::value& field_value) -> std::optional<ScanError> {
            if (key == "id") {
                std::string_view text;
                bool present = false;
                if (auto error = readOptionalString(field_value, path.field("id"), text, present)) return error;
                id = present ? jinja::Value::string(text) : jinja::Value::none();
            } else if (key == "type") {
                std::string_view text;
                if (auto error = readString(field_value, path.field("type"), text)) return error;
                call_type = jinja::Value::string(text);
            } else if (key == "function") {
                return readFunction(field_value, path.field("function"), arena, function);
            } else {
                return checkUnread(field_value, path.field(key));
            }
            return std::nullopt;
        });
    if (error) return error;
    if (call_type.isUndefined()) return fail(path.field("type"), "must be a string");
    if (function.isUndefined())
        return fail(path.field("function"), "missing (a tool call needs function.name and function.arguments)");
    // The keys the request has, in the order of the OpenAI TypedDict pydantic rebuilds: id, function, type.
    jinja::DictBuilder call(arena, 3);
    if (!id.isUndefined()) call.set("id", id);
    call.set("function", function);
    call.set("type", call_type);
    out = call.finish();
    return std::nullopt;
}

std::optional<ScanError> readToolCalls(od::value& value, const Path& path, jinja::Arena& arena, ChatMessage& message) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    message.has_tool_calls = false;
    if (type == od::json_type::null) return std::nullopt;
    if (type != od::json_type::array) return fail(path, "must be an array");
    jinja::ListBuilder calls(arena);
    std::size_t count = 0;
    auto error = forEachElement(
        value, path,
        [&](od::value& element, const Path& element_path) -> std::optional<ScanError> {
            jinja::Value call;
            if (auto error = readToolCall(element, element_path, arena, call)) return error;
            calls.push(call);
            return std::nullopt;
        },
        &count);
    if (error) return error;
    // vLLM drops an empty list, keeping templates on their plain-assistant path.
    message.has_tool_calls = count > 0;
    message.tool_calls = calls.finish();
    return std::nullopt;
}

std::optional<ScanError> readMessage(od::value& value, const Path& path, jinja::Arena& arena, ChatMessage& message) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type != od::json_type::object) return fail(path, "must be an object");
    bool has_role = false;
    bool has_reasoning = false;  // `reasoning` wins over `reasoning_content`
    auto error =
        forEachMember(value, path, [&](std::string_view key, od::value& field_value) -> std::optional<ScanError> {
            if (key == "role") {
                if (auto error = readString(field_value, path.field("role"), message.role)) return error;
                has_role = true;
            } else if (key == "content") {
                return readContent(field_value, path.field("content"), message);
            } else if (key == "tool_calls") {
                return readToolCalls(field_value, path.field("tool_calls"), arena, message);
            } else if (key == "tool_call_id") {
                bool present = false;
                std::string_view id;
                if (auto error = readOptionalString(field_value, path.field("tool_call_id"), id, present)) return error;
                message.has_tool_call_id = true;
                message.tool_call_id = present ? jinja::Value::string(id) : jinja::Value::none();
            } else if (key == "name") {
                od::json_type name_type;
                if (auto error = typeOf(field_value, path.field("name"), name_type)) return error;
                message.has_name = name_type == od::json_type::string;
                if (message.has_name) {
                    if (auto error = field_value.get_string().get(message.name))
                        return jsonError(path.field("name"), error);
                } else {
                    return checkUnread(field_value, path.field("name"));
                }
            } else if (key == "reasoning" || key == "reasoning_content") {
                std::string_view text;
                bool present = false;
                if (auto error = readOptionalString(field_value, path.field(key), text, present)) return error;
                if (present && (key == "reasoning" || !has_reasoning)) {
                    message.has_reasoning = true;
                    message.reasoning = text;
                    has_reasoning = key == "reasoning";
                }
            } else {
                return checkUnread(field_value, path.field(key));
            }
            return std::nullopt;
        });
    if (error) return error;
    if (!has_role) return fail(path.field("role"), "missing");
    return std::nullopt;
}

std::optional<ScanError> readMessages(od::value& value, jinja::Arena& arena, ChatRequest& chat) {
    const Path path("messages");
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type != od::json_type::array) return fail(path, "must be an array");
    // One allocation for a short conversation, not one per doubling.
    chat.messages.reserve(8);
    std::size_t count = 0;
    auto error = forEachElement(
        value, path,
        [&](od::value& element, const Path& element_path) {
            chat.messages.emplace_back();
            return readMessage(element, element_path, arena, chat.messages.back());
        },
        &count);
    if (error) return error;
    if (count == 0) return fail(path, "must contain at least one message");
    return std::nullopt;
}

// `tools` as vLLM validates and dumps them (ChatCompletionToolsParam,
// FunctionDefinition): {"type": "function", "function": {"name",
// "description", "parameters"[, "strict"][, "defer_loading"]}}[+ defer_loading].
std::optional<ScanError> readTool(od::value& value, const Path& path, jinja::Arena& arena, jinja::Value& out,
                                  std::string_view& name) {
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type != od::json_type::object) return fail(path, "must be an object");
    bool has_function = false;
    jinja::Value description = jinja::Value::none();
    jinja::Value parameters = jinja::Value::none();
    jinja::Value strict = jinja::Value::none();
    jinja::Value function_defer = jinja::Value::none();
    jinja::Value tool_defer = jinja::Value::none();
    bool has_name = false;
    auto readOptionalBoolValue = [&](od::value& v, const Path& p, jinja::Value& target) -> std::optional<ScanError> {
        od::json_type t;
        if (auto error = typeOf(v, p, t)) return error;
        if (t == od::json_type::null) return std::nullopt;
        if (t != od::json_type::boolean) return fail(p, "must be a boolean or null");
        bool b = false;
        if (auto error = v.get_bool().get(b)) return jsonError(p, error);
        target = jinja::Value::boolean(b);
        return std::nullopt;
    };
    // The function definition's members.
    const Path fpath = path.field("function");
    const auto readFunctionMember = [&](std::string_view fkey, od::value& fvalue) -> std::optional<ScanError> {
        if (fkey == "name") {
            if (auto error = readString(fvalue, fpath.field("name"), name)) return error;
            has_name = true;
        } else if (fkey == "description") {
            std::string_view text;
            bool present = false;
            if (auto error = readOptionalString(fvalue, fpath.field("description"), text, present)) return error;
            description = present ? jinja::Value::string(text) : jinja::Value::none();
        } else if (fkey == "parameters") {
            od::json_type ptype;
            if (auto error = typeOf(fvalue, fpath.field("parameters"), ptype)) return error;
            if (ptype != od::json_type::null && ptype != od::json_type::object) {
                return fail(fpath.field("parameters"), "must be an object (a JSON schema) or null");
            }
            return readJsonValue(fvalue, fpath.field("parameters"), arena, parameters, kMaxJsonDepthCap);
        } else if (fkey == "strict") {
            return readOptionalBoolValue(fvalue, fpath.field("strict"), strict);
        } else if (fkey == "defer_loading") {
            return readOptionalBoolValue(fvalue, fpath.field("defer_loading"), function_defer);
        } else {
            return checkUnread(fvalue, fpath.field(fkey));
        }
        return std::nullopt;
    };
    auto error =
        forEachMember(value, path, [&](std::string_view key, od::value& field_value) -> std::optional<ScanError> {
            if (key == "type") {
                std::string_view tool_type;
                if (auto error = readString(field_value, path.field("type"), tool_type)) return error;
                if (tool_type != "function") return fail(path.field("type"), "must be \"function\"");
            } else if (key == "defer_loading") {
                return readOptionalBoolValue(field_value, path.field("defer_loading"), tool_defer);
            } else if (key == "function") {
                od::json_type ftype;
                if (auto error = typeOf(field_value, fpath, ftype)) return error;
                if (ftype != od::json_type::object) return fail(fpath, "must be an object");
                if (auto error = forEachMember(field_value, fpath, readFunctionMember)) return error;
                if (!has_name) return fail(fpath.field("name"), "missing (a tool needs function.name)");
                has_function = true;
            } else {
                return checkUnread(field_value, path.field(key));
            }
            return std::nullopt;
        });
    if (error) return error;
    if (!has_function) return fail(path.field("function"), "missing (a tool needs a function definition)");
    if (function_defer.isNone()) function_defer = tool_defer;
    jinja::DictBuilder function(arena, 5);
    function.set("name", jinja::Value::string(name));
    function.set("description", description);
    function.set("parameters", parameters);
    if (!strict.isNone()) function.set("strict", strict);
    if (!function_defer.isNone()) function.set("defer_loading", function_defer);
    jinja::DictBuilder tool(arena, 3);
    tool.set("type", jinja::Value::string("function"));
    tool.set("function", function.finish());
    if (!tool_defer.isNone()) tool.set("defer_loading", tool_defer);
    out = tool.finish();
    return std::nullopt;
}

std::optional<ScanError> readTools(od::value& value, jinja::Arena& arena, ChatRequest& chat,
                                   std::vector<std::string_view>& names) {
    const Path path("tools");
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::null) {
        chat.tools = jinja::Value::none();
        return std::nullopt;
    }
    if (type != od::json_type::array) return fail(path, "must be an array of tools or null");
    jinja::ListBuilder tools(arena);
    auto error =
        forEachElement(value, path, [&](od::value& element, const Path& element_path) -> std::optional<ScanError> {
            jinja::Value tool;
            std::string_view name;
            if (auto error = readTool(element, element_path, arena, tool, name)) return error;
            tools.push(tool);
            names.push_back(name);
            return std::nullopt;
        });
    if (error) return error;
    chat.tools = tools.finish();
    return std::nullopt;
}

std::optional<ScanError> readTokenIds(od::value& value, const Path& path, std::uint64_t& count) {
    std::size_t ids = 0;
    auto error = forEachElement(
        value, path,
        [](od::value& element, const Path& element_path) -> std::optional<ScanError> {
            std::uint64_t id = 0;
            od::json_type type;
            if (auto error = typeOf(element, element_path, type)) return error;
            if (type != od::json_type::number || element.get_uint64().get(id) != simdjson::SUCCESS ||
                id > 0xffffffffu) {
                return fail(element_path, "must be a token id (a non-negative integer)");
            }
            return std::nullopt;
        },
        &ids);
    if (error) return error;
    if (ids == 0) return fail(path, "must not be empty");
    count = ids;
    return std::nullopt;
}

// `prompt`: a string, an array of strings, an array of token ids, or an
// array of arrays of token ids; each string or id array is one sequence.
std::optional<ScanError> readPrompt(od::value& value, ScannedRequest& out) {
    const Path path("prompt");
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::string) {
        out.prompt_texts.emplace_back();
        return readString(value, path, out.prompt_texts.back());
    }
    if (type != od::json_type::array) return fail(path, "must be a string, an array of strings or of token ids");
    std::optional<od::json_type> first_type;
    std::uint64_t flat_ids = 0;
    std::size_t count = 0;
    auto error = forEachElement(
        value, path,
        [&](od::value& element, const Path& element_path) -> std::optional<ScanError> {
            od::json_type element_type;
            if (auto error = typeOf(element, element_path, element_type)) return error;
            if (!first_type) first_type = element_type;
            if (element_type != *first_type) return fail(element_path, "must have the type of prompt[0]");
            if (element_type == od::json_type::string) {
                out.prompt_texts.emplace_back();
                return readString(element, element_path, out.prompt_texts.back());
            }
            if (element_type == od::json_type::number) {
                std::uint64_t id = 0;
                if (element.get_uint64().get(id) != simdjson::SUCCESS || id > 0xffffffffu) {
                    return fail(element_path, "must be a token id (a non-negative integer)");
                }
                ++flat_ids;
                return std::nullopt;
            }
            if (element_type == od::json_type::array) {
                out.prompt_id_counts.emplace_back();
                return readTokenIds(element, element_path, out.prompt_id_counts.back());
            }
            return fail(element_path, "must be a string, a token id or an array of token ids");
        },
        &count);
    if (error) return error;
    if (count == 0) return fail(path, "must not be empty");
    if (flat_ids > 0) out.prompt_id_counts.push_back(flat_ids);
    return std::nullopt;
}

std::optional<ScanError> readStreamOptions(od::value& value, ScannedRequest& out) {
    const Path path("stream_options");
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::null) return std::nullopt;
    if (type != od::json_type::object) return fail(path, "must be an object");
    return forEachMember(value, path, [&](std::string_view key, od::value& field_value) {
        if (key != "include_usage") return checkUnread(field_value, path.field(key));
        return readOptionalBool(field_value, path.field("include_usage"), out.include_usage);
    });
}

// `n` as sent, an integer >= 1; admission holds it to limits.max_n (one
// beyond int64 is simply above it).
std::optional<ScanError> readN(od::value& value, ScannedRequest& out) {
    od::json_type type;
    if (auto error = typeOf(value, "n", type)) return error;
    if (type == od::json_type::null) return std::nullopt;
    ScannedInteger n;
    if (auto error = readInteger(value, "n", n)) return error;
    const bool negative = !n.text.empty() && n.text.front() == '-';
    if (negative || (n.fits_int64 && n.value < 1)) return fail("n", "must be an integer >= 1");
    out.n = n.fits_int64 ? static_cast<std::uint64_t>(n.value) : UINT64_MAX;
    out.n_text = n.text;
    return std::nullopt;
}

std::optional<ScanError> readToolChoice(od::value& value, ScannedRequest& out) {
    const Path path("tool_choice");
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::null) {
        out.tool_choice = ToolChoice::null;
        return std::nullopt;
    }
    if (type == od::json_type::string) {
        std::string_view choice;
        if (auto error = value.get_string().get(choice)) return jsonError(path, error);
        if (choice == "none") {
            out.tool_choice = ToolChoice::none;
        } else if (choice == "auto") {
            out.tool_choice = ToolChoice::auto_;
        } else if (choice == "required") {
            out.tool_choice = ToolChoice::required;
        } else {
            return fail(
                path,
                "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        }
        return std::nullopt;
    }
    if (type != od::json_type::object) {
        return fail(
            path,
            "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    bool has_name = false;
    const Path fpath = path.field("function");
    const auto readFunctionMember = [&](std::string_view fkey, od::value& fvalue) -> std::optional<ScanError> {
        if (fkey != "name") return checkUnread(fvalue, fpath.field(fkey));
        if (auto error = readString(fvalue, fpath.field("name"), out.tool_choice_name)) return error;
        has_name = !out.tool_choice_name.empty();
        return std::nullopt;
    };
    auto error =
        forEachMember(value, path, [&](std::string_view key, od::value& field_value) -> std::optional<ScanError> {
            if (key == "type") {
                std::string_view choice_type;
                if (auto error = readString(field_value, path.field("type"), choice_type)) return error;
                if (choice_type != "function") return fail(path.field("type"), "must be \"function\"");
                return std::nullopt;
            }
            if (key == "function") {
                od::json_type ftype;
                if (auto error = typeOf(field_value, fpath, ftype)) return error;
                if (ftype != od::json_type::object) return fail(fpath, "must be an object with a name");
                return forEachMember(field_value, fpath, readFunctionMember);
            }
            return checkUnread(field_value, path.field(key));
        });
    if (error) return error;
    if (!has_name) return fail(fpath.field("name"), "missing (a named tool choice needs function.name)");
    out.tool_choice = ToolChoice::named;
    return std::nullopt;
}

std::optional<ScanError> readTemplateKwargs(od::value& value, jinja::Arena& arena, ChatRequest& chat) {
    const Path path("chat_template_kwargs");
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::null) return std::nullopt;
    if (type != od::json_type::object) return fail(path, "must be an object");
    if (auto error = readJsonValue(value, path, arena, chat.chat_template_kwargs, kMaxJsonDepthCap)) return error;
    // vLLM refuses these (and a template variable `messages` would collide).
    for (std::string_view reserved : {"chat_template", "tokenize", "messages"}) {
        if (chat.chat_template_kwargs.asDict().find(reserved) != nullptr) {
            return fail(path.field(reserved), "cannot be set by a request");
        }
    }
    return std::nullopt;
}

std::optional<ScanError> readDocuments(od::value& value, jinja::Arena& arena, ChatRequest& chat) {
    const Path path("documents");
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::null) return std::nullopt;
    if (type != od::json_type::array) return fail(path, "must be an array of objects of strings");
    if (auto error = readJsonValue(value, path, arena, chat.documents, kMaxJsonDepthCap)) return error;
    std::size_t index = 0;
    for (const jinja::Value& document : chat.documents.asList()) {
        if (!document.isDict()) return fail(path.index(index), "must be an object of strings");
        for (std::size_t k = 0; k < document.asDict().size; ++k) {
            if (!document.asDict().values[k].isString()) {
                return fail(path.index(index).field(document.asDict().keys[k].text()), "must be a string");
            }
        }
        ++index;
    }
    return std::nullopt;
}

std::optional<ScanError> readReasoningEffort(od::value& value, ChatRequest& chat) {
    const Path path("reasoning_effort");
    std::string_view effort;
    bool present = false;
    if (auto error = readOptionalString(value, path, effort, present)) return error;
    if (!present) return std::nullopt;
    for (std::string_view known : {"none", "minimal", "low", "medium", "high", "xhigh", "max"}) {
        if (effort == known) {
            chat.reasoning_effort = jinja::Value::string(effort);
            return std::nullopt;
        }
    }
    return fail(path, "must be one of none, minimal, low, medium, high, xhigh, max");
}

std::optional<ScanError> readTruncation(od::value& value, ChatRequest& chat) {
    const Path path("truncate_prompt_tokens");
    od::json_type type;
    if (auto error = typeOf(value, path, type)) return error;
    if (type == od::json_type::null) return std::nullopt;
    ScannedInteger n;
    if (auto error = readInteger(value, path, n)) return error;
    if (!n.fits_int64 || n.value < -1) return fail(path, "must be an integer >= -1");
    chat.truncate_prompt_tokens = n.value;
    return std::nullopt;
}

// vLLM's checks of tools against tool_choice (ChatCompletionRequest.check_tool_usage).
std::optional<ScanError> checkToolUsage(ScannedRequest& out, const std::vector<std::string_view>& tool_names) {
    if (out.tool_choice == ToolChoice::none || out.tool_choice == ToolChoice::null ||
        out.tool_choice == ToolChoice::unset) {
        return std::nullopt;
    }
    if (out.chat.tools.isNone()) return fail("tool_choice", "when using `tool_choice`, `tools` must be set");
    if (out.tool_choice == ToolChoice::required && tool_names.empty()) {
        out.chat.tools = jinja::Value::none();  // vLLM turns it into "none" and drops the empty tools
        out.chat.tools_json = {};
        return std::nullopt;
    }
    if (out.tool_choice == ToolChoice::named &&
        std::find(tool_names.begin(), tool_names.end(), out.tool_choice_name) == tool_names.end()) {
        return fail("tool_choice.function.name", "the tool \"" + std::string(clipUtf8(out.tool_choice_name, 80)) +
                                                     "\" does not match any of the specified `tools`");
    }
    return std::nullopt;
}

// Fields read at the top level; each may appear once (a second copy would be
// what a Python backend reads, not what was judged).
enum TopField : unsigned {
    kModel = 1u << 0,
    kMessages = 1u << 1,
    kPrompt = 1u << 2,
    kMaxTokens = 1u << 3,
    kMaxCompletionTokens = 1u << 4,
    kStream = 1u << 5,
    kStreamOptions = 1u << 6,
    kPromptCacheKey = 1u << 7,
    kUser = 1u << 8,
    kN = 1u << 9,
    kTools = 1u << 10,
    kToolChoice = 1u << 11,
    kTemplateKwargs = 1u << 12,
    kAddGenerationPrompt = 1u << 13,
    kContinueFinalMessage = 1u << 14,
    kDocuments = 1u << 15,
    kReasoningEffort = 1u << 16,
    kChatTemplate = 1u << 17,
    kAddSpecialTokens = 1u << 18,
    kTruncate = 1u << 19,
};

std::optional<ScanError> scanDocument(od::document& doc, std::string_view body, Endpoint endpoint, jinja::Arena& arena,
                                      ScannedRequest& out) {
    od::json_type root_type;
    if (auto error = doc.type().get(root_type)) {
        if (error == simdjson::UTF8_ERROR)
            return fail("body", "is not valid UTF-8 (byte offset " + std::to_string(findInvalidUtf8(body)) + ")");
        return jsonError("body", error);
    }
    if (root_type != od::json_type::object) return fail("body", "must be a JSON object");
    const char* location = nullptr;
    if (doc.current_location().get(location) == simdjson::SUCCESS) {
        out.open_brace_offset = static_cast<std::size_t>(location - body.data());
    }
    unsigned seen = 0;
    const bool chat = endpoint == Endpoint::chat_completions;
    std::vector<std::string_view> tool_names;
    auto root_error =
        forEachMember(doc, "body", [&](std::string_view key, od::value& value) -> std::optional<ScanError> {
            unsigned bit = 0;
            std::optional<ScanError> error;
            if (key == "model") {
                bit = kModel;
                error = readString(value, "model", out.model);
                out.has_model = true;
            } else if (key == "messages" && chat) {
                bit = kMessages;
                error = readMessages(value, arena, out.chat);
            } else if (key == "prompt" && !chat) {
                bit = kPrompt;
                error = readPrompt(value, out);
            } else if (key == "max_tokens") {
                bit = kMaxTokens;
                error = readInteger(value, "max_tokens", out.max_tokens);
            } else if (key == "max_completion_tokens" && chat) {
                bit = kMaxCompletionTokens;
                error = readInteger(value, "max_completion_tokens", out.max_completion_tokens);
            } else if (key == "stream") {
                bit = kStream;
                error = readOptionalBool(value, "stream", out.stream);
            } else if (key == "stream_options") {
                bit = kStreamOptions;
                out.has_stream_options = true;
                error = readStreamOptions(value, out);
            } else if (key == "prompt_cache_key") {
                bit = kPromptCacheKey;
                error = readOptionalString(value, "prompt_cache_key", out.prompt_cache_key, out.has_prompt_cache_key);
            } else if (key == "user") {
                bit = kUser;
                bool present = false;
                error = readOptionalString(value, "user", out.user, present);
            } else if (key == "n") {
                bit = kN;
                error = readN(value, out);
            } else if (chat && key == "tools") {
                bit = kTools;
                const char* start = value.raw_json_token().data();
                error = readTools(value, arena, out.chat, tool_names);
                const char* end = nullptr;
                if (!error && !out.chat.tools.isNone() && doc.current_location().get(end) == simdjson::SUCCESS &&
                    end > start) {
                    out.chat.tools_json = trimmed(std::string_view(start, static_cast<std::size_t>(end - start)));
                }
            } else if (chat && key == "tool_choice") {
                bit = kToolChoice;
                error = readToolChoice(value, out);
            } else if (chat && key == "chat_template_kwargs") {
                bit = kTemplateKwargs;
                error = readTemplateKwargs(value, arena, out.chat);
            } else if (chat && key == "add_generation_prompt") {
                bit = kAddGenerationPrompt;
                error = readOptionalBool(value, "add_generation_prompt", out.chat.add_generation_prompt);
            } else if (chat && key == "continue_final_message") {
                bit = kContinueFinalMessage;
                error = readOptionalBool(value, "continue_final_message", out.chat.continue_final_message);
            } else if (chat && key == "documents") {
                bit = kDocuments;
                error = readDocuments(value, arena, out.chat);
            } else if (chat && key == "reasoning_effort") {
                bit = kReasoningEffort;
                error = readReasoningEffort(value, out.chat);
            } else if (chat && key == "chat_template") {
                bit = kChatTemplate;
                std::string_view ignored;
                bool present = false;
                error = readOptionalString(value, "chat_template", ignored, present);
                if (!error && present) {
                    error = fail("chat_template",
                                 "a request may not bring its own chat template (vLLM refuses it unless started "
                                 "with --trust-request-chat-template)");
                }
            } else if (chat && key == "add_special_tokens") {
                bit = kAddSpecialTokens;
                error = readOptionalBool(value, "add_special_tokens", out.chat.add_special_tokens);
            } else if (chat && key == "truncate_prompt_tokens") {
                bit = kTruncate;
                error = readTruncation(value, out.chat);
            } else {
                error = checkUnread(value, Path(key));
            }
            if (error) return error;
            if (bit != 0) {
                if ((seen & bit) != 0) return fail(Path(key), "appears twice");
                seen |= bit;
            }
            return std::nullopt;
        });
    if (root_error) return root_error;
    const char* trailing = nullptr;
    if (doc.current_location().get(trailing) == simdjson::SUCCESS) {
        return fail("body", "trailing content after the JSON object (byte offset " +
                                std::to_string(static_cast<std::size_t>(trailing - body.data())) + ")");
    }
    if (chat && (seen & kMessages) == 0) return fail("messages", "missing (a chat completions request needs messages)");
    if (chat) {
        if ((seen & kTools) != 0 && (seen & kToolChoice) == 0 && !out.chat.tools.isNone())
            out.tool_choice = ToolChoice::auto_;
        if (auto error = checkToolUsage(out, tool_names)) return error;
        if (out.chat.add_generation_prompt && out.chat.continue_final_message) {
            return fail("continue_final_message",
                        "cannot be true together with add_generation_prompt (set add_generation_prompt to false)");
        }
    }
    if (!chat && (seen & kPrompt) == 0) return fail("prompt", "missing (a completions request needs prompt)");
    return std::nullopt;
}

}  // namespace

struct RequestScanner::Impl {
    JsonValidator validator;
    bool fast_json = fastPathOn(FastPath::simdjson_structurals);
    od::parser parser;
    // A padded copy of a body that came without padding, kept between scans
    // (a 4 MB conversation each turn should not fault in fresh pages).
    std::unique_ptr<char[]> copy;
    std::size_t copy_capacity = 0;
};

RequestScanner::RequestScanner() : impl_(std::make_unique<Impl>()) {}

std::string RequestScanner::simdjsonKernels() {
    return "stage 1 " + simdjson::get_active_implementation()->name() + " (chosen for this CPU), On Demand " +
           simdjson::builtin_implementation()->name() + " (compiled)";
}
RequestScanner::~RequestScanner() = default;

std::optional<ScanError> RequestScanner::scan(std::string_view body, std::size_t capacity_bytes, Endpoint endpoint,
                                              std::uint32_t max_json_depth, jinja::Arena& arena, ScannedRequest& out) {
    // A fresh request, in the message list's buffer of the last one (a
    // conversation's list otherwise costs an allocation per request), unless
    // that buffer is a long conversation's.
    constexpr std::size_t kKeptMessages = 64;
    std::vector<ChatMessage> messages = std::move(out.chat.messages);
    messages.clear();
    if (messages.capacity() > kKeptMessages) messages = {};
    out = ScannedRequest{};
    out.chat.messages = std::move(messages);
    // The whole body, every field, is validated as JSON: On Demand validates
    // only what it reads, and the readers recurse. Plain: JsonValidator reads
    // every byte before iterate(). Fast: stage 1 (UTF-8, strings),
    // jsonDepthWithin over its structural index before any reader, then the
    // readers, which check what they read and checkUnread what they skip.
    // Either way a refusal names the fault as JsonValidator finds it.
    JsonValidation validation;
    validation.max_depth = std::min(max_json_depth, kMaxJsonDepthCap);
    const auto plainFault = [&]() -> std::optional<ScanError> {
        if (auto fault = impl_->validator.validate(body, validation)) return faultError(*fault, validation.max_depth);
        return std::nullopt;
    };
    if (!impl_->fast_json) {
        if (auto error = plainFault()) return error;
    }
    if (impl_->parser.capacity() > kShrinkAboveBytes && impl_->parser.capacity() > 4 * body.size()) {
        impl_->parser = od::parser{};
    }
    std::string_view padded = body;
    if (capacity_bytes < body.size() + kScanPaddingBytes) {
        const std::size_t needed = body.size() + kScanPaddingBytes;
        if (impl_->copy_capacity < needed ||
            (impl_->copy_capacity > kShrinkAboveBytes && impl_->copy_capacity > 4 * needed)) {
            impl_->copy = std::make_unique<char[]>(needed);
            impl_->copy_capacity = needed;
        }
        std::memcpy(impl_->copy.get(), body.data(), body.size());
        std::memset(impl_->copy.get() + body.size(), 0, kScanPaddingBytes);
        padded = std::string_view(impl_->copy.get(), body.size());
    }
    // The parser sizes itself to the body; a conversation grows every turn, so
    // grow it with headroom instead of reallocating (and faulting in) per turn.
    if (impl_->parser.capacity() < padded.size()) {
        if (auto error = impl_->parser.allocate(padded.size() + padded.size() / 4 + 4096))
            return jsonError("body", error);
    }
    od::document doc;
    if (auto error = impl_->parser.iterate(padded.data(), padded.size(), padded.size() + kScanPaddingBytes).get(doc)) {
        if (impl_->fast_json) {
            if (auto fault = plainFault()) return fault;  // where stage 1 stopped
        }
        if (error == simdjson::UTF8_ERROR) {
            return fail("body", "is not valid UTF-8 (byte offset " + std::to_string(findInvalidUtf8(body)) + ")");
        }
        if (error == simdjson::EMPTY) return fail("body", "empty (expected a JSON object)");
        return jsonError("body", error);
    }
    if (impl_->fast_json) {
        // The depth before any reader; the readers check the rest (checkUnread).
        const std::span<const std::uint32_t> structurals = simdjsonStructurals(impl_->parser);
        if (structurals.empty() || !jsonDepthWithin(padded, structurals, validation.max_depth)) {
            if (auto fault = plainFault()) return fault;
            if (!structurals.empty()) return fail("body", "malformed JSON");  // the twins disagree: refuse
        }
    }
    auto error = scanDocument(doc, padded, endpoint, arena, out);
    // Invalid JSON a reader refused is named as the plain validation names
    // it (path, byte offset), so the two validations answer alike.
    if (error && impl_->fast_json) {
        if (auto fault = plainFault()) return fault;
    }
    return error;
}

void RequestScanner::setFastJsonValidation(bool on) { impl_->fast_json = on; }

}  // namespace dpgate::admission
