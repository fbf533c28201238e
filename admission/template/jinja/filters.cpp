// Jinja2's builtin filters, with their Python signatures and behaviour
// (jinja2/filters.py, 3.1), and transformers' `tojson` (json.dumps with
// ensure_ascii=False and no HTML escaping). Filters that Jinja implements
// as generators (map, select, unique, items...) return lists here; a
// template can only tell the difference by printing the generator object.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_map>

#include "admission/template/jinja/builtins.hpp"
#include "admission/template/jinja/methods.hpp"
#include "admission/template/jinja/py_float.hpp"
#include "admission/template/jinja/py_json.hpp"
#include "admission/template/jinja/py_text.hpp"
#include "admission/template/jinja/render.hpp"

namespace dpgate::admission::jinja {

namespace {

using Args = CallArgs;

Value listFrom(Renderer& r, const std::vector<Value>& items, bool tuple = false) {
    ListBuilder list(r.arena(), items.size());
    for (const Value& v : items) list.push(v);
    return list.finish(tuple);
}

bool boolArg(Renderer& r, const Args& args, std::size_t index, std::string_view name, bool fallback) {
    const Value* v = args.get(index, name);
    return v == nullptr ? fallback : r.truthy(*v);
}

std::int64_t intArg(Renderer& r, const Args& args, std::size_t index, std::string_view name, std::int64_t fallback) {
    const Value* v = args.get(index, name);
    if (v == nullptr) return fallback;
    if (v->kind() == ValueKind::integer) return v->asInt();
    if (v->isBool()) return v->asBool() ? 1 : 0;
    r.fail("'" + std::string(Renderer::typeName(*v)) + "' object cannot be interpreted as an integer");
}

// The int a part of digits names (past int64: its digits, as Python's int()).
Value integerKey(std::string_view digits) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc() && end == digits.data() + digits.size()) return Value::integer(value);
    const std::size_t first = digits.find_first_not_of('0');
    return Value::bigInteger(digits.substr(first == std::string_view::npos ? digits.size() - 1 : first));
}

// Jinja's attribute path: "a.b.0" -> getitem by each part (digits as ints).
Value attributePath(Renderer& r, const Value& item, const Value& attribute, const Value* fallback) {
    Value current = item;
    if (attribute.isString()) {
        std::string_view path = attribute.text();
        for (;;) {
            const std::size_t dot = path.find('.');
            const std::string_view part = path.substr(0, dot);
            const bool digits =
                !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
            current = r.getitem(current, digits ? integerKey(part) : Value::string(part));
            if (fallback != nullptr && current.isUndefined()) current = *fallback;
            if (dot == std::string_view::npos) break;
            path = path.substr(dot + 1);
        }
        return current;
    }
    current = r.getitem(current, attribute);
    if (fallback != nullptr && current.isUndefined()) current = *fallback;
    return current;
}

Value lowerIfString(Renderer& r, const Value& v) { return v.isString() ? r.makeString(pyLower(v.text())) : v; }

// Python's sorted(): stable, raising on incomparable items.
void sortValues(Renderer& r, std::vector<Value>& items, const std::vector<Value>& keys, bool reverse) {
    std::vector<std::size_t> order(items.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const int c = r.compare(keys[a], keys[b], "<");
        return reverse ? c == 1 : c == -1;
    });
    std::vector<Value> sorted;
    sorted.reserve(items.size());
    for (std::size_t i : order) sorted.push_back(items[i]);
    items = std::move(sorted);
}

Value fDefault(Renderer& r, const Value& input, const Args& args) {
    const Value* fallback = args.get(0, "default_value");
    const bool boolean = boolArg(r, args, 1, "boolean", false);
    if (input.isUndefined() || (boolean && !r.truthy(input)))
        return fallback != nullptr ? *fallback : Value::string("");
    return input;
}

Value fLength(Renderer& r, const Value& input, const Args&) {
    switch (input.kind()) {
        case ValueKind::undefined: return Value::integer(0);
        case ValueKind::string: return Value::integer(static_cast<std::int64_t>(codePointCount(input.text())));
        case ValueKind::list: return Value::integer(static_cast<std::int64_t>(input.asList().size));
        case ValueKind::dict: return Value::integer(static_cast<std::int64_t>(input.asDict().size));
        default: r.fail("object of type '" + std::string(Renderer::typeName(input)) + "' has no len()");
    }
}

Value fTrim(Renderer& r, const Value& input, const Args& args) {
    const std::string_view text = r.str(input);
    const Value* chars = args.get(0, "chars");
    if (chars == nullptr || chars->isNone()) return Value::string(pyStrip(text));
    return Value::string(pyStrip(text, r.str(*chars)));
}

Value fUpper(Renderer& r, const Value& input, const Args&) { return r.makeString(pyUpper(r.str(input))); }
Value fLower(Renderer& r, const Value& input, const Args&) { return r.makeString(pyLower(r.str(input))); }
Value fCapitalize(Renderer& r, const Value& input, const Args&) { return r.makeString(pyCapitalize(r.str(input))); }

// Jinja's title: words start after runs of [-\s({\[<]; first character
// upper, the rest lower (not Python's str.title()).
Value fTitle(Renderer& r, const Value& input, const Args&) {
    const std::string_view text = r.str(input);
    std::string out;
    std::size_t i = 0;
    auto isSeparator = [](char32_t c) {
        return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pyIsSpace(c);
    };
    auto decode = [&](std::size_t at, std::size_t& length) {
        const auto b0 = static_cast<unsigned char>(text[at]);
        length = b0 >= 0xf0 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc0 ? 2 : 1;
        char32_t cp = length == 1 ? b0 : b0 & (0x7f >> length);
        for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[at + k]) & 0x3f);
        return cp;
    };
    while (i < text.size()) {
        std::size_t length = 0;
        const std::size_t start = i;
        const bool separator = isSeparator(decode(i, length));
        while (i < text.size()) {
            std::size_t l = 0;
            if (isSeparator(decode(i, l)) != separator) break;
            i += l;
        }
        const std::string_view item = text.substr(start, i - start);
        if (separator) {
            out += item;
        } else {
            out += pyUpper(item.substr(0, length));
            out += pyLower(item.substr(length));
        }
    }
    return r.makeString(out);
}

Value fReplace(Renderer& r, const Value& input, const Args& args) {
    const Value* old_value = args.get(0, "old");
    const Value* new_value = args.get(1, "new");
    if (old_value == nullptr || new_value == nullptr) r.fail("replace() missing required arguments 'old' and 'new'");
    const Value* count = args.get(2, "count");
    const std::int64_t n = count == nullptr || count->isNone() ? -1 : intArg(r, args, 2, "count", -1);
    const std::string_view text = r.str(input);
    const std::string_view old = r.str(*old_value);
    const std::string_view replacement = r.str(*new_value);
    if (replacement.size() > old.size()) r.ensureRoom(pyReplacedSize(text, old, replacement, n), "replace");
    return r.makeString(pyReplace(text, old, replacement, n));
}

Value fJoin(Renderer& r, const Value& input, const Args& args) {
    const Value* separator = args.get(0, "d");
    const Value* attribute = args.get(1, "attribute");
    std::vector<Value> items;
    r.iterate(input, items);
    std::string out;
    const std::string_view sep = separator != nullptr ? r.str(*separator) : std::string_view{};
    for (std::size_t i = 0; i < items.size(); ++i) {
        // Joins of joins multiply lengths; a separator repeats once per item.
        if (i > 0) {
            r.ensureRoom(out.size() + sep.size(), "join");
            out += sep;
        }
        const Value item =
            attribute != nullptr && !attribute->isNone() ? attributePath(r, items[i], *attribute, nullptr) : items[i];
        r.appendStr(item, out);
        r.ensureRoom(out.size(), "join");
    }
    return r.makeString(out);
}

Value fFirst(Renderer& r, const Value& input, const Args&) {
    std::vector<Value> items;
    r.iterate(input, items);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value fLast(Renderer& r, const Value& input, const Args&) {
    std::vector<Value> items;
    r.iterate(input, items);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value fList(Renderer& r, const Value& input, const Args&) {
    std::vector<Value> items;
    r.iterate(input, items);
    return listFrom(r, items);
}

Value fString(Renderer& r, const Value& input, const Args&) { return Value::string(r.str(input)); }

Value fItems(Renderer& r, const Value& input, const Args&) {
    if (input.isUndefined()) return listFrom(r, {});
    if (!input.isDict()) r.fail("Can only get item pairs from a mapping.");
    const DictData& dict = input.asDict();
    ListBuilder list(r.arena(), dict.size);
    for (std::size_t i = 0; i < dict.size; ++i) {
        ListBuilder pair(r.arena(), 2);
        pair.push(dict.keys[i]);
        pair.push(dict.values[i]);
        list.push(pair.finish(true));
    }
    return list.finish();
}

Value fDictsort(Renderer& r, const Value& input, const Args& args) {
    if (!input.isDict()) r.fail("dictsort needs a mapping, not " + std::string(Renderer::typeName(input)));
    const bool case_sensitive = boolArg(r, args, 0, "case_sensitive", false);
    const Value* by = args.get(1, "by");
    const bool by_value = by != nullptr && by->isString() && by->text() == "value";
    if (by != nullptr && !(by->isString() && (by->text() == "key" || by->text() == "value"))) {
        r.fail("You can only sort by either \"key\" or \"value\"");
    }
    const bool reverse = boolArg(r, args, 2, "reverse", false);
    const DictData& dict = input.asDict();
    std::vector<Value> pairs;
    std::vector<Value> keys;
    for (std::size_t i = 0; i < dict.size; ++i) {
        ListBuilder pair(r.arena(), 2);
        pair.push(dict.keys[i]);
        pair.push(dict.values[i]);
        pairs.push_back(pair.finish(true));
        const Value key = by_value ? dict.values[i] : dict.keys[i];
        keys.push_back(case_sensitive ? key : lowerIfString(r, key));
    }
    sortValues(r, pairs, keys, reverse);
    return listFrom(r, pairs);
}

Value fSort(Renderer& r, const Value& input, const Args& args) {
    const bool reverse = boolArg(r, args, 0, "reverse", false);
    const bool case_sensitive = boolArg(r, args, 1, "case_sensitive", false);
    const Value* attribute = args.get(2, "attribute");
    std::vector<Value> items;
    r.iterate(input, items);
    std::vector<Value> keys;
    for (const Value& item : items) {
        Value key = item;
        if (attribute != nullptr && !attribute->isNone()) {
            // A comma-separated list of attributes sorts by each in turn.
            if (attribute->isString() && attribute->text().find(',') != std::string_view::npos) {
                ListBuilder parts(r.arena());
                std::string_view list = attribute->text();
                for (;;) {
                    const std::size_t comma = list.find(',');
                    const Value part = attributePath(r, item, Value::string(list.substr(0, comma)), nullptr);
                    parts.push(case_sensitive ? part : lowerIfString(r, part));
                    if (comma == std::string_view::npos) break;
                    list = list.substr(comma + 1);
                }
                keys.push_back(parts.finish());
                continue;
            }
            key = attributePath(r, item, *attribute, nullptr);
        }
        keys.push_back(case_sensitive ? key : lowerIfString(r, key));
    }
    sortValues(r, items, keys, reverse);
    return listFrom(r, items);
}

// A hash of a scalar consistent with Python's == (1 == 1.0 == True, and a
// float equal to a big integer hashes as its digits).
std::uint64_t scalarHash(const Value& v) {
    auto ofInt = [](std::int64_t i) { return static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull; };
    switch (v.kind()) {
        case ValueKind::string: return dictKeyHash(v.text());
        case ValueKind::boolean: return ofInt(v.asBool() ? 1 : 0);
        case ValueKind::integer: return ofInt(v.asInt());
        case ValueKind::big_integer: return dictKeyHash(v.text());
        case ValueKind::floating: {
            const double f = v.asFloat();
            if (std::isfinite(f) && f == std::trunc(f)) {
                if (std::fabs(f) < 9223372036854775808.0) return ofInt(static_cast<std::int64_t>(f));
                char digits[400];
                const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, f, std::chars_format::fixed, 0);
                if (ec == std::errc())
                    return dictKeyHash(std::string_view(digits, static_cast<std::size_t>(end - digits)));
            }
            std::uint64_t bits = 0;
            std::memcpy(&bits, &f, sizeof bits);
            return bits;
        }
        case ValueKind::namespace_: return reinterpret_cast<std::uintptr_t>(&v.asNamespace());
        case ValueKind::callable: return reinterpret_cast<std::uintptr_t>(&v.asCallable());
        default: return static_cast<std::uint64_t>(v.kind());
    }
}

// Python's set(): an item is new unless an equal one came before. Hashed,
// so that n distinct items cost n comparisons, not n^2.
Value fUnique(Renderer& r, const Value& input, const Args& args) {
    const bool case_sensitive = boolArg(r, args, 0, "case_sensitive", false);
    const Value* attribute = args.get(1, "attribute");
    std::vector<Value> items;
    r.iterate(input, items);
    std::unordered_multimap<std::uint64_t, Value> seen;
    std::vector<Value> out;
    for (const Value& item : items) {
        Value key = attribute != nullptr && !attribute->isNone() ? attributePath(r, item, *attribute, nullptr) : item;
        if (!case_sensitive) key = lowerIfString(r, key);
        if (key.isList() || key.isDict()) r.fail("unhashable type: '" + std::string(Renderer::typeName(key)) + "'");
        const std::uint64_t hash = scalarHash(key);
        const auto [first, last] = seen.equal_range(hash);
        if (std::any_of(first, last, [&](const auto& entry) { return r.equals(entry.second, key); })) continue;
        seen.emplace(hash, key);
        out.push_back(item);
    }
    return listFrom(r, out);
}

Value fMap(Renderer& r, const Value& input, const Args& args) {
    std::vector<Value> items;
    if (r.truthy(input)) r.iterate(input, items);
    std::vector<Value> out;
    if (args.positional.empty() && args.keyword("attribute") != nullptr) {
        const Value* attribute = args.keyword("attribute");
        const Value* fallback = args.keyword("default");
        for (const auto& [name, value] : args.keywords) {
            if (name != "attribute" && name != "default")
                r.fail("Unexpected keyword argument '" + std::string(name) + "'");
        }
        for (const Value& item : items) out.push_back(attributePath(r, item, *attribute, fallback));
        return listFrom(r, out);
    }
    if (args.positional.empty()) r.fail("map requires a filter argument");
    const std::string_view filter = r.str(args.positional[0]);
    // map('map', ...) nests: what each level keeps while the next runs counts.
    const Renderer::Held held(r, (2 * items.size() + args.size()) * sizeof(Value), "map");
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keywords = args.keywords;
    for (const Value& item : items) out.push_back(r.runFilter(filter, item, rest));
    return listFrom(r, out);
}

Value selectOrReject(Renderer& r, const Value& input, const Args& args, bool attr, bool select) {
    std::vector<Value> items;
    if (r.truthy(input)) r.iterate(input, items);
    std::size_t off = 0;
    const Value* attribute = nullptr;
    if (attr) {
        if (args.positional.empty()) r.fail("Missing parameter for attribute name");
        attribute = &args.positional[0];
        off = 1;
    }
    std::string_view test;
    CallArgs rest;
    if (args.positional.size() > off) {
        test = r.str(args.positional[off]);
        rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off + 1), args.positional.end());
        rest.keywords = args.keywords;
    }
    std::vector<Value> out;
    for (const Value& item : items) {
        const Value subject = attribute != nullptr ? attributePath(r, item, *attribute, nullptr) : item;
        const bool passed = test.empty() ? r.truthy(subject) : r.runTest(test, subject, rest);
        if (passed == select) out.push_back(item);
    }
    return listFrom(r, out);
}

Value fSelect(Renderer& r, const Value& in, const Args& a) { return selectOrReject(r, in, a, false, true); }
Value fReject(Renderer& r, const Value& in, const Args& a) { return selectOrReject(r, in, a, false, false); }
Value fSelectattr(Renderer& r, const Value& in, const Args& a) { return selectOrReject(r, in, a, true, true); }
Value fRejectattr(Renderer& r, const Value& in, const Args& a) { return selectOrReject(r, in, a, true, false); }

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False).
Value fTojson(Renderer& r, const Value& input, const Args& args) {
    JsonDumpOptions options;
    options.ensure_ascii = boolArg(r, args, 0, "ensure_ascii", false);
    if (const Value* indent = args.get(1, "indent"); indent != nullptr && !indent->isNone()) {
        if (indent->isString()) {
            options.indent = std::string(indent->text());
        } else if (indent->kind() == ValueKind::integer || indent->isBool()) {
            // Python's ' ' * indent: any size, and the dump's text is
            // bounded before each line is written.
            const std::int64_t n = indent->isBool() ? (indent->asBool() ? 1 : 0) : indent->asInt();
            const std::size_t width = static_cast<std::size_t>(std::max<std::int64_t>(n, 0));
            r.ensureRoom(width, "tojson indent");
            options.indent = std::string(width, ' ');
        } else if (indent->kind() == ValueKind::big_integer) {
            r.ensureRoom(Arena::kMaxBytes + 1, "tojson indent");
        } else {
            r.fail("indent must be an int or a str");
        }
    }
    if (const Value* separators = args.get(2, "separators"); separators != nullptr && !separators->isNone()) {
        if (!separators->isList() || separators->asList().size != 2) r.fail("separators must be a pair of strings");
        options.item_separator = std::string(r.str(separators->asList().items[0]));
        options.key_separator = std::string(r.str(separators->asList().items[1]));
    }
    options.sort_keys = boolArg(r, args, 3, "sort_keys", false);
    options.callable_type_name = &Renderer::typeName;
    options.room = &r.arena();
    options.work = &r.work();
    std::string out;
    if (auto error = pyJsonDumps(input, options, out)) r.fail(*error);
    return r.makeString(out);
}

Value fInt(Renderer& r, const Value& input, const Args& args) {
    const Value* fallback = args.get(0, "default");
    const std::int64_t base = intArg(r, args, 1, "base", 10);
    auto failed = [&]() { return fallback != nullptr ? *fallback : Value::integer(0); };
    switch (input.kind()) {
        case ValueKind::integer:
        case ValueKind::big_integer: return input;
        case ValueKind::boolean: return Value::integer(input.asBool() ? 1 : 0);
        case ValueKind::floating:
            if (!std::isfinite(input.asFloat()) || std::fabs(input.asFloat()) >= 9.2e18) return failed();
            return Value::integer(static_cast<std::int64_t>(input.asFloat()));
        case ValueKind::string: {
            std::string text(pyStrip(input.text()));
            text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
            try {
                std::size_t used = 0;
                const long long v = std::stoll(text, &used, static_cast<int>(base));
                if (used == text.size()) return Value::integer(v);
            } catch (...) {
            }
            try {
                std::size_t used = 0;
                const double d = std::stod(text, &used);
                if (used == text.size() && std::isfinite(d) && std::fabs(d) < 9.2e18)
                    return Value::integer(static_cast<std::int64_t>(d));
            } catch (...) {
            }
            return failed();
        }
        default: return failed();
    }
}

Value fFloat(Renderer&, const Value& input, const Args& args) {
    const Value* fallback = args.get(0, "default");
    auto failed = [&]() { return fallback != nullptr ? *fallback : Value::floating(0.0); };
    switch (input.kind()) {
        case ValueKind::floating: return input;
        case ValueKind::integer: return Value::floating(static_cast<double>(input.asInt()));
        case ValueKind::big_integer: return Value::floating(std::strtod(std::string(input.text()).c_str(), nullptr));
        case ValueKind::boolean: return Value::floating(input.asBool() ? 1.0 : 0.0);
        case ValueKind::string: {
            const std::string text(pyStrip(input.text()));
            try {
                std::size_t used = 0;
                const double d = std::stod(text, &used);
                if (used == text.size()) return Value::floating(d);
            } catch (...) {
            }
            return failed();
        }
        default: return failed();
    }
}

Value fAbs(Renderer& r, const Value& input, const Args&) {
    if (input.kind() == ValueKind::integer) return input.asInt() < 0 ? r.binary('-', Value::integer(0), input) : input;
    if (input.isBool()) return Value::integer(input.asBool() ? 1 : 0);
    if (input.isFloat()) return Value::floating(std::fabs(input.asFloat()));
    r.fail("bad operand type for abs(): '" + std::string(Renderer::typeName(input)) + "'");
}

Value fRound(Renderer& r, const Value& input, const Args& args) {
    const std::int64_t precision = intArg(r, args, 0, "precision", 0);
    const Value* method = args.get(1, "method");
    const std::string_view how = method != nullptr ? r.str(*method) : "common";
    if (how != "common" && how != "ceil" && how != "floor") r.fail("method must be common, ceil or floor");
    if (!input.isNumber())
        r.fail("type " + std::string(Renderer::typeName(input)) + " doesn't define __round__ method");
    const double value = input.isFloat()  ? input.asFloat()
                         : input.isBool() ? (input.asBool() ? 1.0 : 0.0)
                                          : static_cast<double>(input.asInt());
    const double scale = std::pow(10.0, static_cast<double>(precision));
    if (how == "ceil") return Value::floating(std::ceil(value * scale) / scale);
    if (how == "floor") return Value::floating(std::floor(value * scale) / scale);
    if (!input.isFloat()) return input.isBool() ? Value::integer(input.asBool() ? 1 : 0) : input;
    // Python's round(): half to even, on the decimal value.
    const double scaled = value * scale;
    double rounded = std::nearbyint(scaled);
    return Value::floating(rounded / scale);
}

Value minOrMax(Renderer& r, const Value& input, const Args& args, bool max) {
    const bool case_sensitive = boolArg(r, args, 0, "case_sensitive", false);
    const Value* attribute = args.get(1, "attribute");
    std::vector<Value> items;
    r.iterate(input, items);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    std::size_t best = 0;
    auto key = [&](const Value& item) {
        Value k = attribute != nullptr && !attribute->isNone() ? attributePath(r, item, *attribute, nullptr) : item;
        return case_sensitive ? k : lowerIfString(r, k);
    };
    Value best_key = key(items[0]);
    for (std::size_t i = 1; i < items.size(); ++i) {
        const Value k = key(items[i]);
        if (r.compare(k, best_key, max ? ">" : "<") == (max ? 1 : -1)) {
            best = i;
            best_key = k;
        }
    }
    return items[best];
}

Value fMax(Renderer& r, const Value& in, const Args& a) { return minOrMax(r, in, a, true); }
Value fMin(Renderer& r, const Value& in, const Args& a) { return minOrMax(r, in, a, false); }

Value fSum(Renderer& r, const Value& input, const Args& args) {
    const Value* attribute = args.get(0, "attribute");
    const Value* start = args.get(1, "start");
    Value total = start != nullptr ? *start : Value::integer(0);
    std::vector<Value> items;
    r.iterate(input, items);
    for (const Value& item : items) {
        total =
            r.binary('+', total,
                     attribute != nullptr && !attribute->isNone() ? attributePath(r, item, *attribute, nullptr) : item);
    }
    return total;
}

Value fReverse(Renderer& r, const Value& input, const Args&) {
    if (input.isString()) return r.makeString(pySlice(input.text(), std::nullopt, std::nullopt, -1));
    std::vector<Value> items;
    r.iterate(input, items);
    std::reverse(items.begin(), items.end());
    return listFrom(r, items);
}

Value fIndent(Renderer& r, const Value& input, const Args& args) {
    const Value* width = args.get(0, "width");
    std::string_view indention = "    ";
    std::string spaces;
    if (width != nullptr && width->isString()) {
        indention = width->text();
    } else if (width != nullptr) {
        // Python's ' ' * width, of any size: the result is sized before it is built.
        const std::size_t n = static_cast<std::size_t>(std::max<std::int64_t>(intArg(r, args, 0, "width", 4), 0));
        r.ensureRoom(n, "indent");
        spaces.assign(n, ' ');
        indention = spaces;
    }
    const bool first = boolArg(r, args, 1, "first", false);
    const bool blank = boolArg(r, args, 2, "blank", false);
    const std::string_view input_text = r.str(input);
    r.ensureRoom(input_text.size() + 1, "indent");
    std::string text(input_text);
    text += '\n';
    const std::vector<std::string_view> lines = pySplitlines(text, false);
    // The result's size: every line, a newline between lines, the
    // indention before each indented one.
    std::size_t indented = first ? 1 : 0;
    std::size_t size = 0;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        size += lines[i].size() + (i > 0 ? 1 : 0);
        if (i > 0 && (blank || !lines[i].empty())) ++indented;
    }
    if (!indention.empty() && indented > (Arena::kMaxBytes - size) / indention.size()) {
        r.ensureRoom(Arena::kMaxBytes + 1, "indent");
    }
    r.ensureRoom(size + indented * indention.size(), "indent");
    r.step(lines.size());
    std::string out;
    out.reserve(size + indented * indention.size());
    if (first) out += indention;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) {
            out += '\n';
            if (blank || !lines[i].empty()) out += indention;
        }
        out += lines[i];
    }
    return r.makeString(out);
}

Value fCenter(Renderer& r, const Value& input, const Args& args) {
    const std::int64_t width = intArg(r, args, 0, "width", 80);
    r.ensureRoom(static_cast<std::size_t>(std::max<std::int64_t>(width, 0)), "center");
    return r.makeString(pyCenter(r.str(input), width));
}

Value fWordcount(Renderer& r, const Value& input, const Args&) {
    const std::string_view text = r.str(input);
    std::int64_t words = 0;
    bool in_word = false;
    for (std::size_t i = 0; i < text.size();) {
        const auto b0 = static_cast<unsigned char>(text[i]);
        const std::size_t length = b0 >= 0xf0 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc0 ? 2 : 1;
        const std::string_view ch = text.substr(i, length);
        const bool word = ch == "_" || pyIsAlnum(ch);
        if (word && !in_word) ++words;
        in_word = word;
        i += length;
    }
    return Value::integer(words);
}

Value fBatch(Renderer& r, const Value& input, const Args& args) {
    const std::int64_t count = intArg(r, args, 0, "linecount", 1);
    if (count <= 0) r.fail("batch size must be positive");
    const Value* fill = args.get(1, "fill_with");
    std::vector<Value> items;
    r.iterate(input, items);
    const bool filled = fill != nullptr && !fill->isNone();
    const std::size_t per_row = static_cast<std::size_t>(count);
    // The last row is padded to `linecount` items: sized before it is built.
    if (filled && !items.empty()) {
        if (per_row > Arena::kMaxBytes / sizeof(Value)) r.ensureRoom(Arena::kMaxBytes + 1, "batch");
        r.ensureRoom(per_row * sizeof(Value), "batch");
    }
    ListBuilder out(r.arena());
    for (std::size_t i = 0; i < items.size(); i += std::min(per_row, items.size() - i)) {
        const std::size_t taken = std::min(per_row, items.size() - i);
        ListBuilder row(r.arena(), filled ? per_row : taken);
        for (std::size_t k = 0; k < taken; ++k) row.push(items[i + k]);
        if (filled) {
            for (std::size_t k = taken; k < per_row; ++k) row.push(*fill);
        }
        r.step(1 + ((filled ? per_row : taken) >> 4));
        out.push(row.finish());
    }
    return out.finish();
}

// Attribute access only (no fallback to items, unlike `.`): a dict's keys
// are not its attributes.
Value fAttr(Renderer& r, const Value& input, const Args& args) {
    const Value* name = args.get(0, "name");
    if (name == nullptr) r.fail("attr() missing required argument 'name'");
    const std::string_view attribute = r.str(*name);
    if (input.isNamespace()) {
        if (const Value* found = input.asNamespace().find(attribute)) return *found;
    } else if (input.isString() || input.isDict() || input.isList()) {
        if (findMethod(input, attribute)) return r.getattr(input, attribute);
    }
    return Value::undefined(r.arena().copy("'" + std::string(Renderer::typeName(input)) +
                                           " object' has no attribute '" + std::string(attribute) + "'"));
}

Value fEscape(Renderer& r, const Value& input, const Args&) {
    const std::string_view text = r.str(input);
    auto escaped = [](char c) -> std::string_view {
        switch (c) {
            case '&': return "&amp;";
            case '<': return "&lt;";
            case '>': return "&gt;";
            case '"': return "&#34;";
            case '\'': return "&#39;";
            default: return {};
        }
    };
    std::size_t size = 0;
    for (char c : text) size += escaped(c).empty() ? 1 : escaped(c).size();
    r.ensureRoom(size, "escape");
    std::string out;
    out.reserve(size);
    for (char c : text) {
        const std::string_view entity = escaped(c);
        if (entity.empty()) {
            out += c;
        } else {
            out += entity;
        }
    }
    return r.makeString(out);
}

Value fSafe(Renderer&, const Value& input, const Args&) { return input; }

// Python's printf-style `%` with the conversions templates use.
Value fFormat(Renderer& r, const Value& input, const Args& args) {
    const std::string_view fmt = r.str(input);
    std::string out;
    std::size_t next = 0;
    auto take = [&]() -> const Value& {
        if (next >= args.positional.size()) r.fail("not enough arguments for format string");
        return args.positional[next++];
    };
    for (std::size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) r.fail("incomplete format");
        const char conv = fmt[i];
        if (conv == '%') {
            out += '%';
        } else if (conv == 's') {
            r.appendStr(take(), out);
        } else if (conv == 'r') {
            r.appendRepr(take(), out);
        } else if (conv == 'd' || conv == 'i') {
            const Value& v = take();
            if (v.isFloat()) {
                out += std::to_string(static_cast<long long>(v.asFloat()));
            } else if (v.isNumber()) {
                r.appendStr(v.isBool() ? Value::integer(v.asBool() ? 1 : 0) : v, out);
            } else {
                r.fail("%d format: a real number is required, not " + std::string(Renderer::typeName(v)));
            }
        } else {
            r.fail(std::string("unsupported format character '") + conv + "'");
        }
        r.ensureRoom(out.size(), "format");
    }
    if (next < args.positional.size()) r.fail("not all arguments converted during string formatting");
    return r.makeString(out);
}

Value fTruncate(Renderer& r, const Value& input, const Args& args) {
    const std::string_view text = r.str(input);
    const std::int64_t length = intArg(r, args, 0, "length", 255);
    const bool killwords = boolArg(r, args, 1, "killwords", false);
    const Value* end_value = args.get(2, "end");
    const std::string_view end = end_value != nullptr ? r.str(*end_value) : std::string_view("...");
    const Value* leeway_value = args.get(3, "leeway");
    const std::int64_t leeway =
        leeway_value != nullptr && !leeway_value->isNone() ? intArg(r, args, 3, "leeway", 5) : 5;
    const auto size = static_cast<std::int64_t>(codePointCount(text));
    const auto end_size = static_cast<std::int64_t>(codePointCount(end));
    if (length < end_size) r.fail("expected length >= " + std::to_string(end_size) + ", got " + std::to_string(length));
    if (size <= length + leeway) return input.isString() ? input : Value::string(text);
    std::string cut = pySlice(text, 0, length - end_size, 1);
    if (!killwords) {
        const std::size_t space = cut.rfind(' ');
        if (space != std::string::npos) cut.resize(space);
    }
    cut += end;
    return r.makeString(cut);
}

struct FilterEntry {
    std::string_view name;
    FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", fAbs},           {"attr", fAttr},
    {"batch", fBatch},       {"capitalize", fCapitalize},
    {"center", fCenter},     {"count", fLength},
    {"d", fDefault},         {"default", fDefault},
    {"dictsort", fDictsort}, {"e", fEscape},
    {"escape", fEscape},     {"first", fFirst},
    {"float", fFloat},       {"forceescape", fEscape},
    {"format", fFormat},     {"indent", fIndent},
    {"int", fInt},           {"items", fItems},
    {"join", fJoin},         {"last", fLast},
    {"length", fLength},     {"list", fList},
    {"lower", fLower},       {"map", fMap},
    {"max", fMax},           {"min", fMin},
    {"reject", fReject},     {"rejectattr", fRejectattr},
    {"replace", fReplace},   {"reverse", fReverse},
    {"round", fRound},       {"safe", fSafe},
    {"select", fSelect},     {"selectattr", fSelectattr},
    {"sort", fSort},         {"string", fString},
    {"sum", fSum},           {"title", fTitle},
    {"tojson", fTojson},     {"trim", fTrim},
    {"truncate", fTruncate}, {"unique", fUnique},
    {"upper", fUpper},       {"wordcount", fWordcount},
};

}  // namespace

FilterFn findFilter(std::string_view name) {
    for (const FilterEntry& entry : kFilters) {
        if (entry.name == name) return entry.fn;
    }
    return nullptr;
}

}  // namespace dpgate::admission::jinja
