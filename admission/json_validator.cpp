#include "admission/json_validator.hpp"

#include <simdjson.h>

#include "admission/json_grammar.hpp"
#include "admission/json_string_stop.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace dpgate::admission {

namespace {

// A stack deeper than this is not kept for the next call.
constexpr std::size_t kKeptLevels = 4096;

using json_grammar::hex4;
using json_grammar::isDigit;
using json_grammar::isSpace;

const char* skipSpace(const char* p, const char* end) {
    while (p < end && isSpace(*p)) ++p;
    return p;
}

void appendUtf8(std::string& out, unsigned long cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

// A key as a path names it: unescaped, at most kMaxJsonPathKeyBytes. `raw`
// is the text between the quotes of a key the validator has accepted.
void appendKey(std::string& out, std::string_view raw) {
    std::string key;
    for (std::size_t i = 0; i < raw.size() && key.size() <= kMaxJsonPathKeyBytes; ++i) {
        if (raw[i] != '\\') {
            key += raw[i];
            continue;
        }
        const char escape = raw[++i];
        switch (escape) {
            case 'b': key += '\b'; break;
            case 'f': key += '\f'; break;
            case 'n': key += '\n'; break;
            case 'r': key += '\r'; break;
            case 't': key += '\t'; break;
            case 'u': {
                const char* digits = raw.data() + i + 1;
                const char* end = raw.data() + raw.size();
                unsigned long cp = static_cast<unsigned long>(hex4(digits, end));
                i += 4;
                if (cp >= 0xd800 && cp <= 0xdbff) {  // the validator saw its low half follow
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (static_cast<unsigned long>(hex4(digits + 6, end)) - 0xdc00);
                    i += 6;
                }
                appendUtf8(key, cp);
                break;
            }
            default: key += escape; break;  // " \ /
        }
    }
    out += clipUtf8(key, kMaxJsonPathKeyBytes);
}

}  // namespace

std::string JsonValidator::path(std::string_view text) const {
    std::string out;
    for (std::size_t i = 0; i < stack_.size() && out.size() <= kMaxJsonPathBytes; ++i) {
        const Level& level = stack_[i];
        if (level.object) {
            if (!level.has_key) break;  // between a ',' and the next key: the path is the object's
            if (i > 0) out += '.';
            appendKey(out, text.substr(level.key_offset, level.key_bytes));
        } else {
            out += '[';
            out += std::to_string(level.index);
            out += ']';
        }
    }
    return clipJsonPath(std::move(out));
}

std::optional<JsonFault> JsonValidator::fault(JsonFault::Kind kind, std::string_view text, const char* at,
                                              const char* what) const {
    JsonFault fault;
    fault.kind = kind;
    fault.offset = static_cast<std::size_t>(at - text.data());
    fault.path = path(text);
    fault.what = what;
    return fault;
}

std::optional<JsonFault> JsonValidator::validate(std::string_view text, const JsonValidation& options) {
    stack_.clear();
    if (stack_.capacity() > kKeptLevels) stack_ = {};
    if (options.check_utf8 && !simdjson::validate_utf8(text.data(), text.size())) {
        JsonFault fault;
        fault.kind = JsonFault::Kind::invalid_utf8;
        fault.offset = findInvalidUtf8(text);
        return fault;
    }
    using Kind = JsonFault::Kind;
    const char* const begin = text.data();
    const char* const end = begin + text.size();
    const auto stringStop = options.simd ? jsonStringStop : jsonStringStopPlain;

    // The string whose opening quote is at p: past its closing quote, or
    // null with `what` and `at` set.
    const char* what = "";
    const char* at = nullptr;
    auto string = [&](const char* p) -> const char* {
        const char* const open = p++;
        for (;;) {
            p = stringStop(p, end);
            if (p == end) {
                at = open;
                what = "malformed JSON (unclosed string)";
                return nullptr;
            }
            if (*p == '"') return p + 1;
            if (*p != '\\') {
                at = p;
                what = "invalid string (unescaped control character)";
                return nullptr;
            }
            const char* after = json_grammar::escapeEnd(p, end, what);
            if (after == nullptr) {
                at = end - p < 2 ? open : p;  // an unclosed string is named where it opens
                return nullptr;
            }
            p = after;
        }
    };
    // An object key at p, then ':': the first byte of the value after it, or null.
    auto key = [&](const char* p) -> const char* {
        Level& level = stack_.back();
        if (p == end || *p != '"') {
            at = p;
            what = p == end ? "malformed JSON (truncated: expected an object key)"
                            : "malformed JSON (expected an object key in double quotes)";
            return nullptr;
        }
        const char* after = string(p);
        if (after == nullptr) return nullptr;
        level.key_offset = static_cast<std::size_t>(p + 1 - begin);
        level.key_bytes = static_cast<std::size_t>(after - 1 - (p + 1));
        level.has_key = true;
        p = skipSpace(after, end);
        if (p == end || *p != ':') {
            at = p;
            what = "malformed JSON (expected ':' after an object key)";
            return nullptr;
        }
        return skipSpace(p + 1, end);
    };

    const char* p = skipSpace(begin, end);
    if (p == end) return fault(Kind::empty, text, p);
    for (;;) {
        // A value starts at p.
        if (p == end) return fault(Kind::syntax, text, p, "malformed JSON (truncated: expected a value)");
        switch (*p) {
            case '{':
            case '[': {
                if (stack_.size() >= options.max_depth) return fault(Kind::too_deep, text, p);
                const bool object = *p == '{';
                stack_.push_back(Level{});
                stack_.back().object = object;
                p = skipSpace(p + 1, end);
                if (p < end && *p == (object ? '}' : ']')) {
                    stack_.pop_back();
                    ++p;
                    break;
                }
                if (object && (p = key(p)) == nullptr) return fault(Kind::syntax, text, at, what);
                continue;
            }
            case '"':
                if ((p = string(p)) == nullptr) return fault(Kind::syntax, text, at, what);
                break;
            case '-':
            case '0':
            case '1':
            case '2':
            case '3':
            case '4':
            case '5':
            case '6':
            case '7':
            case '8':
            case '9': {
                const char* const start = p;
                p = json_grammar::numberEnd(p, end);
                // 01, 1.2.3, 1e5e5, 0x10: a number running on.
                if (p == nullptr || (p < end && (isDigit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' ||
                                                 *p == '-' || *p == 'x' || *p == 'X'))) {
                    return fault(Kind::syntax, text, start, "malformed JSON (invalid number)");
                }
                break;
            }
            case 't':
            case 'f':
            case 'n': {
                const std::string_view literal = json_grammar::literalFor(*p);
                const auto rest = static_cast<std::size_t>(end - p);
                if (rest < literal.size() || std::string_view(p, literal.size()) != literal ||
                    (rest > literal.size() && ((p[literal.size()] >= 'a' && p[literal.size()] <= 'z') ||
                                               (p[literal.size()] >= 'A' && p[literal.size()] <= 'Z')))) {
                    return fault(Kind::syntax, text, p,
                                 "malformed JSON (invalid literal: expected true, false or null)");
                }
                p += literal.size();
                break;
            }
            case 'N':
            case 'I': return fault(Kind::syntax, text, p, "malformed JSON (NaN and Infinity are not JSON values)");
            default: return fault(Kind::syntax, text, p, "malformed JSON (expected a value)");
        }
        // After a value: close containers until a ',' starts the next value.
        for (;;) {
            p = skipSpace(p, end);
            if (stack_.empty()) {
                if (p != end)
                    return fault(Kind::syntax, text, p, "malformed JSON (trailing content after the JSON value)");
                return std::nullopt;
            }
            Level& level = stack_.back();
            if (p == end) {
                return fault(Kind::syntax, text, p,
                             level.object ? "malformed JSON (truncated: the object is not closed)"
                                          : "malformed JSON (truncated: the array is not closed)");
            }
            if (*p == (level.object ? '}' : ']')) {
                stack_.pop_back();
                ++p;
                continue;
            }
            if (*p != ',') {
                return fault(Kind::syntax, text, p,
                             level.object ? "malformed JSON (expected ',' or '}' after an object member)"
                                          : "malformed JSON (expected ',' or ']' after an array element)");
            }
            p = skipSpace(p + 1, end);
            if (level.object) {
                level.has_key = false;
                if ((p = key(p)) == nullptr) return fault(Kind::syntax, text, at, what);
            } else {
                ++level.index;
            }
            break;
        }
    }
}

}  // namespace dpgate::admission
