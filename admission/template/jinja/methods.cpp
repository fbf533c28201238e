#include "admission/template/jinja/methods.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "admission/template/jinja/py_text.hpp"

namespace dpgate::admission::jinja {

namespace {

struct MethodEntry {
    std::string_view name;
    MethodId id;
};

constexpr MethodEntry kStrMethods[] = {
    {"capitalize", MethodId::str_capitalize},
    {"casefold", MethodId::str_casefold},
    {"center", MethodId::str_center},
    {"count", MethodId::str_count},
    {"endswith", MethodId::str_endswith},
    {"find", MethodId::str_find},
    {"format", MethodId::str_format},
    {"index", MethodId::str_index},
    {"isalnum", MethodId::str_isalnum},
    {"isalpha", MethodId::str_isalpha},
    {"isdecimal", MethodId::str_isdecimal},
    {"isdigit", MethodId::str_isdigit},
    {"islower", MethodId::str_islower},
    {"isnumeric", MethodId::str_isnumeric},
    {"isspace", MethodId::str_isspace},
    {"istitle", MethodId::str_istitle},
    {"isupper", MethodId::str_isupper},
    {"join", MethodId::str_join},
    {"ljust", MethodId::str_ljust},
    {"lower", MethodId::str_lower},
    {"lstrip", MethodId::str_lstrip},
    {"partition", MethodId::str_partition},
    {"removeprefix", MethodId::str_removeprefix},
    {"removesuffix", MethodId::str_removesuffix},
    {"replace", MethodId::str_replace},
    {"rfind", MethodId::str_rfind},
    {"rindex", MethodId::str_rindex},
    {"rjust", MethodId::str_rjust},
    {"rpartition", MethodId::str_rpartition},
    {"rsplit", MethodId::str_rsplit},
    {"rstrip", MethodId::str_rstrip},
    {"split", MethodId::str_split},
    {"splitlines", MethodId::str_splitlines},
    {"startswith", MethodId::str_startswith},
    {"strip", MethodId::str_strip},
    {"swapcase", MethodId::str_swapcase},
    {"title", MethodId::str_title},
    {"upper", MethodId::str_upper},
    {"zfill", MethodId::str_zfill},
};

constexpr MethodEntry kDictMethods[] = {
    {"clear", MethodId::unsafe},       {"copy", MethodId::dict_copy},    {"get", MethodId::dict_get},
    {"items", MethodId::dict_items},   {"keys", MethodId::dict_keys},    {"pop", MethodId::unsafe},
    {"popitem", MethodId::unsafe},     {"setdefault", MethodId::unsafe}, {"update", MethodId::unsafe},
    {"values", MethodId::dict_values}, {"fromkeys", MethodId::unsafe},
};

constexpr MethodEntry kListMethods[] = {
    {"append", MethodId::unsafe},    {"clear", MethodId::unsafe},  {"copy", MethodId::list_copy},
    {"count", MethodId::list_count}, {"extend", MethodId::unsafe}, {"index", MethodId::list_index},
    {"insert", MethodId::unsafe},    {"pop", MethodId::unsafe},    {"remove", MethodId::unsafe},
    {"reverse", MethodId::unsafe},   {"sort", MethodId::unsafe},
};

template <std::size_t N>
std::optional<MethodId> lookup(const MethodEntry (&table)[N], std::string_view name) {
    for (const MethodEntry& entry : table) {
        if (entry.name == name) return entry.id;
    }
    return std::nullopt;
}

std::string_view strArg(Renderer& r, const CallArgs& args, std::size_t index, std::string_view method) {
    const Value* v = args.get(index, {});
    if (v == nullptr) r.fail(std::string(method) + "() takes at least " + std::to_string(index + 1) + " argument");
    if (!v->isString()) {
        r.fail(std::string(method) + "() argument must be str, not " + std::string(Renderer::typeName(*v)));
    }
    return v->text();
}

std::optional<std::int64_t> optionalInt(Renderer& r, const CallArgs& args, std::size_t index, std::string_view name) {
    const Value* v = args.get(index, name);
    if (v == nullptr || v->isNone()) return std::nullopt;
    if (v->kind() == ValueKind::integer) return v->asInt();
    if (v->isBool()) return v->asBool() ? 1 : 0;
    r.fail("slice indices must be integers or None or have an __index__ method");
}

// startswith/endswith take a str or a tuple of str.
bool affix(Renderer& r, std::string_view text, const CallArgs& args, bool prefix) {
    const Value* v = args.get(0, {});
    if (v == nullptr)
        r.fail(std::string(prefix ? "startswith" : "endswith") + "() takes at least 1 argument (0 given)");
    auto test = [&](std::string_view s) {
        return prefix ? text.substr(0, s.size()) == s
                      : text.size() >= s.size() && text.substr(text.size() - s.size()) == s;
    };
    if (v->isString()) return test(v->text());
    if (v->isList() && v->asList().tuple) {
        for (const Value& item : v->asList()) {
            if (!item.isString())
                r.fail("tuple for startswith must only contain str, not " + std::string(Renderer::typeName(item)));
            if (test(item.text())) return true;
        }
        return false;
    }
    r.fail(std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " +
           std::string(Renderer::typeName(*v)));
}

Value stringList(Renderer& r, const std::vector<std::string_view>& parts) {
    ListBuilder list(r.arena(), parts.size());
    for (std::string_view part : parts) list.push(Value::string(part));
    return list.finish();
}

Value pair(Renderer& r, Value a, Value b) {
    ListBuilder list(r.arena(), 2);
    list.push(a);
    list.push(b);
    return list.finish(true);
}

constexpr std::int64_t kMaxFormatNumber = INT64_MAX;  // sys.maxsize

// One replacement field's format spec ([[fill]align][sign][0][width][.precision][type])
// applied to a value, as format() does for str, int and float.
void appendFormatted(Renderer& r, const Value& v, std::string_view spec, std::string& out) {
    std::size_t i = 0;
    std::string fill = " ";
    char align = 0;
    auto isAlign = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
    if (spec.size() >= 2 && isAlign(spec[1]) && static_cast<unsigned char>(spec[0]) < 0x80) {
        fill = std::string(1, spec[0]);
        align = spec[1];
        i = 2;
    } else if (!spec.empty() && isAlign(spec[0])) {
        align = spec[0];
        i = 1;
    }
    char sign = '-';
    if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
    if (i < spec.size() && spec[i] == '0') {
        if (align == 0) {
            fill = "0";
            align = '=';
        }
        ++i;
    }
    // Python: "Too many decimal digits in format string" past sys.maxsize.
    auto digits = [&](std::int64_t& value) {
        while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
            if (value > (kMaxFormatNumber - 9) / 10) r.fail("Too many decimal digits in format string");
            value = value * 10 + (spec[i++] - '0');
        }
    };
    std::int64_t width = 0;
    digits(width);
    std::int64_t precision = -1;
    if (i < spec.size() && spec[i] == '.') {
        precision = 0;
        ++i;
        digits(precision);
    }
    char type = i < spec.size() ? spec[i++] : 0;
    if (i != spec.size()) r.fail("Invalid format specifier");
    std::string body;
    std::string sign_text;
    const bool number = v.isNumber();
    if (!number) {
        if (type != 0 && type != 's')
            r.fail(std::string("Unknown format code '") + type + "' for object of type '" +
                   std::string(Renderer::typeName(v)) + "'");
        body = std::string(r.str(v));
        if (precision >= 0) body = pySlice(body, 0, precision, 1);
    } else {
        const bool is_float = v.isFloat() || type == 'f' || type == 'F' || type == 'e' || type == 'g' || type == '%';
        if (is_float) {
            double x = v.isFloat()  ? v.asFloat()
                       : v.isBool() ? (v.asBool() ? 1.0 : 0.0)
                                    : static_cast<double>(v.asInt());
            if (type == '%') x *= 100;
            const bool negative = std::signbit(x);
            char buffer[512];
            const int p = precision >= 0 ? static_cast<int>(std::min<std::int64_t>(precision, 100)) : 6;
            if (type == 0 && precision < 0) {
                std::string text;
                r.appendStr(Value::floating(std::fabs(x)), text);
                body = text;
            } else {
                const char* fmt = type == 'e' ? "%.*e" : (type == 'g' || type == 0) ? "%.*g" : "%.*f";
                std::snprintf(buffer, sizeof buffer, fmt, p, std::fabs(x));
                body = buffer;
                if (type == '%') body += '%';
            }
            sign_text = negative ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
        } else {
            if (v.kind() == ValueKind::big_integer) r.fail("big integers cannot be formatted here");
            const std::int64_t x = v.isBool() ? (v.asBool() ? 1 : 0) : v.asInt();
            const unsigned long long magnitude =
                x < 0 ? 0ull - static_cast<unsigned long long>(x) : static_cast<unsigned long long>(x);
            const int base = type == 'x' || type == 'X' ? 16 : type == 'o' ? 8 : type == 'b' ? 2 : 10;
            if (type != 0 && type != 'd' && base == 10)
                r.fail(std::string("Unknown format code '") + type + "' for object of type 'int'");
            char buffer[72];
            const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, magnitude, base);
            body.assign(buffer, end);
            if (type == 'X')
                for (char& c : body) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            sign_text = x < 0 ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
        }
    }
    if (align == 0) align = number ? '>' : '<';
    const std::int64_t length = static_cast<std::int64_t>(codePointCount(body) + codePointCount(sign_text));
    const std::int64_t pad = std::max<std::int64_t>(0, width - length);
    if (static_cast<std::uint64_t>(pad) > Arena::kMaxBytes) r.ensureRoom(Arena::kMaxBytes + 1, "format width");
    r.ensureRoom(out.size() + body.size() + sign_text.size() + static_cast<std::size_t>(pad) * fill.size(),
                 "format width");
    auto repeat = [&](std::int64_t n) {
        for (std::int64_t k = 0; k < n; ++k) out += fill;
    };
    if (align == '=') {
        out += sign_text;
        repeat(pad);
        out += body;
    } else if (align == '<') {
        out += sign_text + body;
        repeat(pad);
    } else if (align == '>') {
        repeat(pad);
        out += sign_text + body;
    } else {
        repeat(pad / 2);
        out += sign_text + body;
        repeat(pad - pad / 2);
    }
}

Value strMethod(Renderer& r, MethodId method, std::string_view name, std::string_view text, const CallArgs& args) {
    switch (method) {
        case MethodId::str_startswith: return Value::boolean(affix(r, text, args, true));
        case MethodId::str_endswith: return Value::boolean(affix(r, text, args, false));
        case MethodId::str_split:
        case MethodId::str_rsplit: {
            const Value* sep = args.get(0, "sep");
            const std::optional<std::int64_t> maxsplit = optionalInt(r, args, 1, "maxsplit");
            const bool right = method == MethodId::str_rsplit;
            if (sep == nullptr || sep->isNone()) {
                return stringList(r,
                                  right ? pyRsplit(text, maxsplit.value_or(-1)) : pySplit(text, maxsplit.value_or(-1)));
            }
            if (!sep->isString()) r.fail("must be str or None, not " + std::string(Renderer::typeName(*sep)));
            if (sep->text().empty()) r.fail("empty separator");
            return stringList(r, right ? pyRsplit(text, sep->text(), maxsplit.value_or(-1))
                                       : pySplit(text, sep->text(), maxsplit.value_or(-1)));
        }
        case MethodId::str_splitlines: {
            const Value* keep = args.get(0, "keepends");
            return stringList(r, pySplitlines(text, keep != nullptr && r.truthy(*keep)));
        }
        case MethodId::str_strip:
        case MethodId::str_lstrip:
        case MethodId::str_rstrip: {
            const Value* chars = args.get(0, "chars");
            if (chars != nullptr && !chars->isNone() && !chars->isString()) {
                r.fail(std::string(name) + " arg must be None or str");
            }
            const bool with_chars = chars != nullptr && chars->isString();
            if (method == MethodId::str_strip)
                return Value::string(with_chars ? pyStrip(text, chars->text()) : pyStrip(text));
            if (method == MethodId::str_lstrip)
                return Value::string(with_chars ? pyLstrip(text, chars->text()) : pyLstrip(text));
            return Value::string(with_chars ? pyRstrip(text, chars->text()) : pyRstrip(text));
        }
        case MethodId::str_upper: return r.makeString(pyUpper(text));
        case MethodId::str_lower:
        case MethodId::str_casefold: return r.makeString(pyLower(text));
        case MethodId::str_title: return r.makeString(pyTitle(text));
        case MethodId::str_capitalize: return r.makeString(pyCapitalize(text));
        case MethodId::str_swapcase: return r.makeString(pySwapcase(text));
        case MethodId::str_replace: {
            const std::optional<std::int64_t> count = optionalInt(r, args, 2, "count");
            const std::string_view old = strArg(r, args, 0, name);
            const std::string_view replacement = strArg(r, args, 1, name);
            if (replacement.size() > old.size())
                r.ensureRoom(pyReplacedSize(text, old, replacement, count.value_or(-1)), "replace");
            return r.makeString(pyReplace(text, old, replacement, count.value_or(-1)));
        }
        case MethodId::str_find:
        case MethodId::str_rfind:
        case MethodId::str_index:
        case MethodId::str_rindex: {
            const std::string_view sub = strArg(r, args, 0, name);
            const bool right = method == MethodId::str_rfind || method == MethodId::str_rindex;
            const std::int64_t at =
                right ? pyRfind(text, sub, optionalInt(r, args, 1, "start"), optionalInt(r, args, 2, "end"))
                      : pyFind(text, sub, optionalInt(r, args, 1, "start"), optionalInt(r, args, 2, "end"));
            if (at < 0 && (method == MethodId::str_index || method == MethodId::str_rindex))
                r.fail("substring not found");
            return Value::integer(at);
        }
        case MethodId::str_count: return Value::integer(pyCount(text, strArg(r, args, 0, name)));
        case MethodId::str_join: {
            const Value* items = args.get(0, "iterable");
            if (items == nullptr) r.fail("join() takes exactly one argument (0 given)");
            std::vector<Value> values;
            r.iterate(*items, values);
            // The result's size first: the separator repeats once per item.
            std::size_t size = 0;
            for (std::size_t i = 0; i < values.size(); ++i) {
                if (!values[i].isString()) {
                    r.fail("sequence item " + std::to_string(i) + ": expected str instance, " +
                           std::string(Renderer::typeName(values[i])) + " found");
                }
                const std::size_t more = values[i].text().size() + (i > 0 ? text.size() : 0);
                if (more > r.arena().roomBytes() || size > r.arena().roomBytes() - more) {
                    r.ensureRoom(Arena::kMaxBytes + 1, "join");
                }
                size += more;
            }
            r.step(Renderer::scanSteps(size));
            std::string out;
            out.reserve(size);
            for (std::size_t i = 0; i < values.size(); ++i) {
                if (i > 0) out += text;
                out += values[i].text();
            }
            return r.makeString(out);
        }
        case MethodId::str_isdigit: return Value::boolean(pyIsDigit(text));
        case MethodId::str_isalpha: return Value::boolean(pyIsAlpha(text));
        case MethodId::str_isalnum: return Value::boolean(pyIsAlnum(text));
        case MethodId::str_isspace: return Value::boolean(pyIsSpaceStr(text));
        case MethodId::str_isupper: return Value::boolean(pyIsUpper(text));
        case MethodId::str_islower: return Value::boolean(pyIsLower(text));
        case MethodId::str_isdecimal: return Value::boolean(pyIsDecimal(text));
        case MethodId::str_isnumeric: return Value::boolean(pyIsNumeric(text));
        case MethodId::str_istitle: return Value::boolean(pyIsTitle(text));
        case MethodId::str_center:
        case MethodId::str_ljust:
        case MethodId::str_rjust: {
            const std::optional<std::int64_t> width = optionalInt(r, args, 0, "width");
            if (!width) r.fail(std::string(name) + "() takes at least 1 argument (0 given)");
            std::string_view fill = " ";
            if (const Value* f = args.get(1, "fillchar")) {
                if (!f->isString() || codePointCount(f->text()) != 1) {
                    r.fail("The fill character must be exactly one character long");
                }
                fill = f->text();
            }
            if (*width > static_cast<std::int64_t>(Arena::kMaxBytes)) r.ensureRoom(Arena::kMaxBytes + 1, "padding");
            r.ensureRoom(static_cast<std::size_t>(std::max<std::int64_t>(*width, 0)) * fill.size(), "padding");
            if (method == MethodId::str_center) return r.makeString(pyCenter(text, *width, fill));
            if (method == MethodId::str_ljust) return r.makeString(pyLjust(text, *width, fill));
            return r.makeString(pyRjust(text, *width, fill));
        }
        case MethodId::str_zfill: {
            const std::optional<std::int64_t> width = optionalInt(r, args, 0, "width");
            if (!width) r.fail("zfill() takes exactly one argument (0 given)");
            r.ensureRoom(static_cast<std::size_t>(std::max<std::int64_t>(*width, 0)), "padding");
            return r.makeString(pyZfill(text, *width));
        }
        case MethodId::str_partition:
        case MethodId::str_rpartition: {
            const std::string_view sep = strArg(r, args, 0, name);
            if (sep.empty()) r.fail("empty separator");
            const std::size_t at = method == MethodId::str_partition ? text.find(sep) : text.rfind(sep);
            ListBuilder list(r.arena(), 3);
            if (at == std::string_view::npos) {
                if (method == MethodId::str_partition) {
                    list.push(Value::string(text));
                    list.push(Value::string({}));
                    list.push(Value::string({}));
                } else {
                    list.push(Value::string({}));
                    list.push(Value::string({}));
                    list.push(Value::string(text));
                }
            } else {
                list.push(Value::string(text.substr(0, at)));
                list.push(Value::string(text.substr(at, sep.size())));
                list.push(Value::string(text.substr(at + sep.size())));
            }
            return list.finish(true);
        }
        case MethodId::str_removeprefix: {
            const std::string_view prefix = strArg(r, args, 0, name);
            return Value::string(text.substr(0, prefix.size()) == prefix ? text.substr(prefix.size()) : text);
        }
        case MethodId::str_removesuffix: {
            const std::string_view suffix = strArg(r, args, 0, name);
            const bool has =
                !suffix.empty() && text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
            return Value::string(has ? text.substr(0, text.size() - suffix.size()) : text);
        }
        case MethodId::str_format: {
            // "{}" / "{0}" / "{name}" replacement fields, as str.format without format specs.
            std::string out;
            std::size_t auto_index = 0;
            for (std::size_t i = 0; i < text.size(); ++i) {
                const char c = text[i];
                if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
                    out += '{';
                    ++i;
                } else if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
                    out += '}';
                    ++i;
                } else if (c == '{') {
                    const std::size_t close = text.find('}', i);
                    if (close == std::string_view::npos) r.fail("Single '{' encountered in format string");
                    std::string_view field = text.substr(i + 1, close - i - 1);
                    std::string_view spec;
                    if (const std::size_t colon = field.find(':'); colon != std::string_view::npos) {
                        spec = field.substr(colon + 1);
                        field = field.substr(0, colon);
                    }
                    const Value* v = nullptr;
                    std::size_t index = 0;
                    if (field.empty()) {
                        v = args.get(auto_index++, {});
                    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
                        // Past size_t the index is out of range all the same.
                        const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), index);
                        v = ec == std::errc() ? args.get(index, {}) : nullptr;
                    } else {
                        v = args.keyword(field);
                    }
                    if (v == nullptr)
                        r.fail("Replacement index " + std::string(field) + " out of range for positional args tuple");
                    appendFormatted(r, *v, spec, out);
                    r.ensureRoom(out.size(), "format");
                    i = close;
                } else if (c == '}') {
                    r.fail("Single '}' encountered in format string");
                } else {
                    out += c;
                }
            }
            return r.makeString(out);
        }
        default: r.fail("'str' object has no attribute '" + std::string(name) + "'");
    }
}

}  // namespace

bool isDictMethodName(std::string_view name) { return lookup(kDictMethods, name).has_value(); }

std::optional<MethodId> findMethod(const Value& object, std::string_view name) {
    switch (object.kind()) {
        case ValueKind::string: return lookup(kStrMethods, name);
        case ValueKind::dict: return lookup(kDictMethods, name);
        case ValueKind::list:
            return object.asList().tuple ? (name == "count"   ? std::optional(MethodId::list_count)
                                            : name == "index" ? std::optional(MethodId::list_index)
                                                              : std::nullopt)
                                         : lookup(kListMethods, name);
        default: return std::nullopt;
    }
}

Value callMethod(Renderer& r, MethodId method, std::string_view name, const Value& self, const CallArgs& args) {
    if (method == MethodId::unsafe) {
        r.fail("access to attribute '" + std::string(name) + "' of '" + std::string(Renderer::typeName(self)) +
               "' object is unsafe.");
    }
    // A string method goes through its text once or a few times.
    r.step(self.isString() ? Renderer::scanSteps(self.text().size()) : 1);
    if (self.isString()) return strMethod(r, method, name, self.text(), args);
    if (self.isDict()) {
        const DictData& dict = self.asDict();
        switch (method) {
            case MethodId::dict_get: {
                const Value* key = args.get(0, {});
                if (key == nullptr) r.fail("get expected at least 1 argument, got 0");
                const Value* fallback = args.get(1, {});
                if (key->isString()) {
                    if (const Value* found = dict.find(key->text())) return *found;
                } else {
                    r.step(dict.size);
                    for (std::size_t i = 0; i < dict.size; ++i) {
                        if (r.equals(dict.keys[i], *key)) return dict.values[i];
                    }
                }
                return fallback != nullptr ? *fallback : Value::none();
            }
            case MethodId::dict_items: {
                ListBuilder list(r.arena(), dict.size);
                for (std::size_t i = 0; i < dict.size; ++i) list.push(pair(r, dict.keys[i], dict.values[i]));
                return list.finish();
            }
            case MethodId::dict_keys:
            case MethodId::dict_values: {
                ListBuilder list(r.arena(), dict.size);
                for (std::size_t i = 0; i < dict.size; ++i)
                    list.push(method == MethodId::dict_keys ? dict.keys[i] : dict.values[i]);
                return list.finish();
            }
            case MethodId::dict_copy: return self;
            default: break;
        }
    }
    if (self.isList()) {
        const ListData& list = self.asList();
        switch (method) {
            case MethodId::list_count: {
                const Value* item = args.get(0, {});
                if (item == nullptr) r.fail("count() takes exactly one argument (0 given)");
                r.step(list.size);
                return Value::integer(
                    std::count_if(list.begin(), list.end(), [&](const Value& v) { return r.equals(v, *item); }));
            }
            case MethodId::list_index: {
                const Value* item = args.get(0, {});
                if (item == nullptr) r.fail("index expected at least 1 argument, got 0");
                r.step(list.size);
                for (std::size_t i = 0; i < list.size; ++i) {
                    if (r.equals(list.items[i], *item)) return Value::integer(static_cast<std::int64_t>(i));
                }
                r.fail("value is not in list");
            }
            case MethodId::list_copy: return self;
            default: break;
        }
    }
    r.fail("'" + std::string(Renderer::typeName(self)) + "' object has no attribute '" + std::string(name) + "'");
}

}  // namespace dpgate::admission::jinja
