// Python's behaviour of the values a template handles: str(), repr(),
// truth, iteration, attribute and item access as Jinja's sandbox resolves
// them, comparisons and arithmetic, with Python's error messages.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

#include "admission/template/jinja/callable.hpp"
#include "admission/template/jinja/methods.hpp"
#include "admission/template/jinja/py_float.hpp"
#include "admission/template/jinja/py_text.hpp"
#include "admission/template/jinja/render.hpp"

namespace dpgate::admission::jinja {

namespace {

bool isIntLike(const Value& v) { return v.kind() == ValueKind::integer || v.kind() == ValueKind::boolean; }
std::int64_t intOf(const Value& v) { return v.isBool() ? (v.asBool() ? 1 : 0) : v.asInt(); }
double floatOf(const Value& v) {
    if (v.isFloat()) return v.asFloat();
    if (v.kind() == ValueKind::big_integer) return std::strtod(std::string(v.text()).c_str(), nullptr);
    return static_cast<double>(intOf(v));
}

// Python's floor division and modulo on ints (the result takes the divisor's sign).
std::int64_t floorDiv(std::int64_t a, std::int64_t b) {
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}
std::int64_t floorMod(std::int64_t a, std::int64_t b) {
    std::int64_t m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

// Python's float % float.
double floatMod(double a, double b) {
    double m = std::fmod(a, b);
    if (m != 0.0 && ((m < 0) != (b < 0))) m += b;
    if (m == 0.0) m = std::copysign(0.0, b);
    return m;
}

}  // namespace

std::string_view Renderer::typeName(const Value& v) {
    switch (v.kind()) {
        case ValueKind::undefined: return "Undefined";
        case ValueKind::none: return "NoneType";
        case ValueKind::boolean: return "bool";
        case ValueKind::integer:
        case ValueKind::big_integer: return "int";
        case ValueKind::floating: return "float";
        case ValueKind::string: return "str";
        case ValueKind::list: return v.asList().tuple ? "tuple" : "list";
        case ValueKind::dict: return "dict";
        case ValueKind::namespace_: return "Namespace";
        case ValueKind::callable:
            switch (v.asCallable().kind) {
                case CallableData::Kind::macro:
                case CallableData::Kind::caller: return "Macro";
                case CallableData::Kind::method: return "builtin_function_or_method";
                default: return "function";
            }
    }
    return "object";
}

void Renderer::failUndefined(const Value& v) const {
    fail(v.text().empty() ? std::string("'Undefined' is undefined") : std::string(v.text()));
}

bool Renderer::truthy(const Value& v) const {
    switch (v.kind()) {
        case ValueKind::undefined:
        case ValueKind::none: return false;
        case ValueKind::boolean: return v.asBool();
        case ValueKind::integer: return v.asInt() != 0;
        case ValueKind::big_integer: return true;
        case ValueKind::floating: return v.asFloat() != 0.0;
        case ValueKind::string: return !v.text().empty();
        case ValueKind::list: return v.asList().size != 0;
        case ValueKind::dict: return v.asDict().size != 0;
        default: return true;
    }
}

void Renderer::appendStr(const Value& v, std::string& out) {
    switch (v.kind()) {
        case ValueKind::undefined: return;
        case ValueKind::none: out += "None"; return;
        case ValueKind::boolean: out += v.asBool() ? "True" : "False"; return;
        case ValueKind::integer: {
            char buffer[24];
            const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v.asInt());
            out.append(buffer, end);
            return;
        }
        case ValueKind::big_integer:
        case ValueKind::string: out += v.text(); return;
        case ValueKind::floating: out += pyFloatRepr(v.asFloat()); return;
        default: appendRepr(v, out);
    }
}

namespace {

// One list, tuple, dict or namespace whose repr is being written.
struct ReprFrame {
    const Value* v;
    std::size_t next;
    bool value_next;  // dict, namespace: the key is written, its value is next
};

}  // namespace

void Renderer::appendRepr(const Value& v, std::string& out) {
    switch (v.kind()) {
        case ValueKind::list:
        case ValueKind::dict:
        case ValueKind::namespace_: break;
        case ValueKind::string: out += pyRepr(v.text()); return;
        case ValueKind::undefined: out += "Undefined"; return;
        case ValueKind::callable: {
            const CallableData& c = v.asCallable();
            if (c.kind == CallableData::Kind::macro || c.kind == CallableData::Kind::caller) {
                out += "<Macro ";
                out += pyRepr(c.name);
                out += '>';
            } else if (c.kind == CallableData::Kind::method) {
                out += "<built-in method ";
                out += c.name;
                out += " of ";
                out += typeName(c.self);
                out += " object>";
            } else {
                out += "<function ";
                out += c.name;
                out += '>';
            }
            return;
        }
        default: appendStr(v, out); return;
    }
    // Containers, depth first with a stack of their own.
    std::vector<ReprFrame> stack;
    auto enter = [&](const Value& item) {
        switch (item.kind()) {
            case ValueKind::list: out += item.asList().tuple ? '(' : '['; break;
            case ValueKind::dict: out += '{'; break;
            case ValueKind::namespace_: out += "<Namespace {"; break;
            default: appendRepr(item, out); return;
        }
        if (stack.size() == kMaxValueDepth) throw ValueTooDeep{"while getting the repr of an object"};
        stack.push_back({&item, 0, false});
    };
    enter(v);
    while (!stack.empty()) {
        // `frame` is not used after enter(), which may move the stack.
        ReprFrame& frame = stack.back();
        const Value& container = *frame.v;
        step();
        // Shared sublists make the text exponential in the arena's bytes.
        ensureRoom(out.size(), "repr");
        if (container.isList()) {
            const ListData& list = container.asList();
            if (frame.next == list.size) {
                if (list.tuple && list.size == 1) out += ',';
                out += list.tuple ? ')' : ']';
                stack.pop_back();
                continue;
            }
            if (frame.next > 0) out += ", ";
            enter(list.items[frame.next++]);
            continue;
        }
        const bool is_dict = container.isDict();
        const std::size_t size = is_dict ? container.asDict().size : container.asNamespace().size;
        if (frame.value_next) {
            out += ": ";
            frame.value_next = false;
            const std::size_t i = frame.next++;
            enter(is_dict ? container.asDict().values[i] : container.asNamespace().values[i]);
            continue;
        }
        if (frame.next == size) {
            out += is_dict ? "}" : "}>";
            stack.pop_back();
            continue;
        }
        if (frame.next > 0) out += ", ";
        frame.value_next = true;
        if (is_dict) {
            enter(container.asDict().keys[frame.next]);
        } else {
            out += pyRepr(container.asNamespace().names[frame.next]);
        }
    }
}

std::string_view Renderer::str(const Value& v) {
    if (v.isString()) return v.text();
    if (v.isUndefined()) return {};
    std::string text;
    appendStr(v, text);
    return arena_.copy(text);
}

void Renderer::iterate(const Value& v, std::vector<Value>& items) {
    items.clear();
    switch (v.kind()) {
        case ValueKind::undefined: return;
        case ValueKind::list:
            step(1 + (v.asList().size >> 2));
            items.assign(v.asList().begin(), v.asList().end());
            return;
        case ValueKind::dict: {
            const DictData& dict = v.asDict();
            step(1 + (dict.size >> 2));
            items.assign(dict.keys, dict.keys + dict.size);
            return;
        }
        case ValueKind::string: {
            const std::string_view text = v.text();
            // A Value per character: 24 times the text, outside the arena.
            const std::size_t characters = codePointCount(text);
            if (characters > Arena::kMaxBytes / sizeof(Value)) ensureRoom(Arena::kMaxBytes, "characters of a string");
            ensureRoom(characters * sizeof(Value), "characters of a string");
            step(scanSteps(text.size()) + (characters >> 2));
            items.reserve(characters);
            for (std::size_t i = 0; i < text.size();) {
                std::size_t length = 1;
                const auto b0 = static_cast<unsigned char>(text[i]);
                if (b0 >= 0xf0) {
                    length = 4;
                } else if (b0 >= 0xe0) {
                    length = 3;
                } else if (b0 >= 0xc0) {
                    length = 2;
                }
                items.push_back(Value::string(text.substr(i, length)));
                i += length;
            }
            return;
        }
        default: fail("'" + std::string(typeName(v)) + "' object is not iterable");
    }
}

Value Renderer::sequence(const Value& v) {
    switch (v.kind()) {
        case ValueKind::list: return v;
        case ValueKind::undefined: {
            static constexpr ListData kNothing{nullptr, 0, false};
            return Value::list(&kNothing);
        }
        case ValueKind::dict:
            return Value::list(arena_.make<ListData>(ListData{v.asDict().keys, v.asDict().size, false}));
        case ValueKind::string: {
            const std::string_view text = v.text();
            step(scanSteps(text.size()));
            ListBuilder characters(arena_, codePointCount(text));
            for (std::size_t i = 0; i < text.size();) {
                const auto b0 = static_cast<unsigned char>(text[i]);
                const std::size_t length = b0 >= 0xf0 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc0 ? 2 : 1;
                characters.push(Value::string(text.substr(i, length)));
                i += length;
            }
            return characters.finish();
        }
        default: fail("'" + std::string(typeName(v)) + "' object is not iterable");
    }
}

Value Renderer::getattr(const Value& obj, std::string_view name) {
    switch (obj.kind()) {
        case ValueKind::undefined: failUndefined(obj);
        case ValueKind::dict:
        case ValueKind::string:
        case ValueKind::list: {
            if (auto method = findMethod(obj, name)) {
                // The sandbox hands out mutating methods as an undefined that
                // fails when called.
                if (*method == MethodId::unsafe) {
                    return Value::undefined(arena_.copy("access to attribute '" + std::string(name) + "' of '" +
                                                        std::string(typeName(obj)) + "' object is unsafe."));
                }
                CallableData* c = arena_.make<CallableData>();
                c->kind = CallableData::Kind::method;
                c->name = name;
                c->self = obj;
                c->method = *method;
                return Value::callable(c);
            }
            if (obj.isDict()) {
                if (const Value* found = obj.asDict().find(name)) return *found;
            }
            break;
        }
        case ValueKind::namespace_:
            if (const Value* found = obj.asNamespace().find(name)) return *found;
            break;
        default: break;
    }
    std::string message = "'" + std::string(typeName(obj)) + " object' has no attribute '" + std::string(name) + "'";
    return Value::undefined(arena_.copy(message));
}

Value Renderer::getitem(const Value& obj, const Value& key) {
    switch (obj.kind()) {
        case ValueKind::undefined: failUndefined(obj);
        case ValueKind::dict: {
            const DictData& dict = obj.asDict();
            if (key.isString()) {
                if (const Value* found = dict.find(key.text())) return *found;
            } else {
                step(1 + dict.size);
                for (std::size_t i = 0; i < dict.size; ++i) {
                    if (equals(dict.keys[i], key)) return dict.values[i];
                }
            }
            break;
        }
        case ValueKind::list:
        case ValueKind::string: {
            if (isIntLike(key)) {
                const std::int64_t index = intOf(key);
                if (obj.isString()) {
                    if (auto ch = pyCharAt(obj.text(), index)) return Value::string(*ch);
                } else {
                    const ListData& list = obj.asList();
                    const std::int64_t size = static_cast<std::int64_t>(list.size);
                    const std::int64_t at = index < 0 ? index + size : index;
                    if (at >= 0 && at < size) return list.items[at];
                }
                std::string message =
                    "'" + std::string(typeName(obj)) + " object' has no element " + std::to_string(index);
                return Value::undefined(arena_.copy(message));
            }
            break;
        }
        default: break;
    }
    if (key.isString()) return getattr(obj, key.text());
    std::string message = "'" + std::string(typeName(obj)) + " object' has no element ";
    appendRepr(key, message);
    return Value::undefined(arena_.copy(message));
}

int Renderer::compare(const Value& left, const Value& right, std::string_view op) {
    // Lists compare at their first unequal items: a loop down the nesting.
    const Value* pa = &left;
    const Value* pb = &right;
    for (std::size_t depth = 0; pa->isList() && pb->isList() && pa->asList().tuple == pb->asList().tuple; ++depth) {
        if (depth == kMaxValueDepth) throw ValueTooDeep{"in comparison"};
        const ListData& x = pa->asList();
        const ListData& y = pb->asList();
        std::size_t i = 0;
        while (i < x.size && i < y.size && pyEquals(x.items[i], y.items[i], &work_, depth + 1)) ++i;
        step(1 + i);
        if (i == x.size || i == y.size) return x.size < y.size ? -1 : x.size > y.size ? 1 : 0;
        pa = &x.items[i];
        pb = &y.items[i];
    }
    const Value& a = *pa;
    const Value& b = *pb;
    if (a.isUndefined()) failUndefined(a);
    if (b.isUndefined()) failUndefined(b);
    if (a.isNumber() && b.isNumber()) {
        if (isIntLike(a) && isIntLike(b)) {
            const std::int64_t x = intOf(a);
            const std::int64_t y = intOf(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        const double x = floatOf(a);
        const double y = floatOf(b);
        if (std::isnan(x) || std::isnan(y)) return 2;  // every ordering is false
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.isString() && b.isString()) {
        step(scanSteps(std::min(a.text().size(), b.text().size())));
        const int c = a.text().compare(b.text());  // UTF-8 byte order is code point order
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    fail("'" + std::string(op) + "' not supported between instances of '" + std::string(typeName(a)) + "' and '" +
         std::string(typeName(b)) + "'");
}

bool Renderer::contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case ValueKind::undefined: return false;
        case ValueKind::string:
            if (!item.isString()) {
                fail("'in <string>' requires string as left operand, not " + std::string(typeName(item)));
            }
            step(scanSteps(container.text().size()));
            return pyContains(container.text(), item.text());
        case ValueKind::list:
            step(1 + container.asList().size);
            return std::any_of(container.asList().begin(), container.asList().end(),
                               [&](const Value& v) { return equals(v, item); });
        case ValueKind::dict: {
            const DictData& dict = container.asDict();
            if (item.isString()) return dict.find(item.text()) != nullptr;
            step(1 + dict.size);
            for (std::size_t i = 0; i < dict.size; ++i) {
                if (equals(dict.keys[i], item)) return true;
            }
            return false;
        }
        default: fail("argument of type '" + std::string(typeName(container)) + "' is not iterable");
    }
}

Value Renderer::binary(char op, const Value& a, const Value& b) {
    if (a.isUndefined()) failUndefined(a);
    if (b.isUndefined()) failUndefined(b);
    const char* symbol = op == 'f' ? "//" : op == 'p' ? "**" : nullptr;
    const std::string op_text = symbol != nullptr ? std::string(symbol) : std::string(1, op);
    auto unsupported = [&]() -> Value {
        fail("unsupported operand type(s) for " + op_text + ": '" + std::string(typeName(a)) + "' and '" +
             std::string(typeName(b)) + "'");
    };
    // Sequences.
    if (op == '+' && a.isString()) {
        if (!b.isString()) fail("can only concatenate str (not \"" + std::string(typeName(b)) + "\") to str");
        const std::size_t size = a.text().size() + b.text().size();
        char* out = static_cast<char*>(arena_.allocate(size, 1));
        std::copy(a.text().begin(), a.text().end(), out);
        std::copy(b.text().begin(), b.text().end(), out + a.text().size());
        return Value::string({out, size});
    }
    if (op == '+' && a.isList()) {
        if (!b.isList() || b.asList().tuple != a.asList().tuple) {
            const std::string kind(typeName(a));
            fail("can only concatenate " + kind + " (not \"" + std::string(typeName(b)) + "\") to " + kind);
        }
        ListBuilder builder(arena_, a.asList().size + b.asList().size);
        for (const Value& v : a.asList()) builder.push(v);
        for (const Value& v : b.asList()) builder.push(v);
        return builder.finish(a.asList().tuple);
    }
    if (op == '*' && (a.isString() || a.isList() || b.isString() || b.isList())) {
        const Value& seq = a.isString() || a.isList() ? a : b;
        const Value& count = a.isString() || a.isList() ? b : a;
        if (!isIntLike(count))
            fail("can't multiply sequence by non-int of type '" + std::string(typeName(count)) + "'");
        const std::int64_t n = std::max<std::int64_t>(0, intOf(count));
        if (seq.isString()) {
            const std::string_view text = seq.text();
            if (n > 0 && text.size() > (std::size_t{1} << 40) / static_cast<std::size_t>(n))
                fail("repeated string is too long");
            const std::size_t size = text.size() * static_cast<std::size_t>(n);
            char* out = static_cast<char*>(arena_.allocate(std::max<std::size_t>(size, 1), 1));
            for (std::int64_t i = 0; i < n; ++i) std::copy(text.begin(), text.end(), out + text.size() * i);
            return Value::string({out, size});
        }
        const ListData& list = seq.asList();
        if (n > 0 && list.size > Arena::kMaxBytes / sizeof(Value) / static_cast<std::size_t>(n))
            fail("repeated list is too long");
        arena_.ensureRoom(list.size * static_cast<std::size_t>(n) * sizeof(Value), "list repetition");
        ListBuilder builder(arena_, list.size * static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) {
            step();
            for (const Value& v : list) builder.push(v);
        }
        return builder.finish(list.tuple);
    }
    if (op == '%' && a.isString())
        return runFilter(
            "format", a,
            CallArgs{b.isList() && b.asList().tuple ? std::vector<Value>(b.asList().begin(), b.asList().end())
                                                    : std::vector<Value>{b},
                     {}});
    if (!a.isNumber() || !b.isNumber()) return unsupported();
    if (a.kind() == ValueKind::big_integer || b.kind() == ValueKind::big_integer) {
        if (!a.isFloat() && !b.isFloat())
            fail("integer arithmetic beyond 64 bits is not supported by dpgate's template engine");
    }
    const bool ints = isIntLike(a) && isIntLike(b);
    if (ints) {
        const std::int64_t x = intOf(a);
        const std::int64_t y = intOf(b);
        std::int64_t r = 0;
        switch (op) {
            case '+':
                if (__builtin_add_overflow(x, y, &r)) fail("integer overflow");
                return Value::integer(r);
            case '-':
                if (__builtin_sub_overflow(x, y, &r)) fail("integer overflow");
                return Value::integer(r);
            case '*':
                if (__builtin_mul_overflow(x, y, &r)) fail("integer overflow");
                return Value::integer(r);
            case '/':
                if (y == 0) fail("division by zero");
                return Value::floating(static_cast<double>(x) / static_cast<double>(y));
            case 'f':
                if (y == 0) fail("integer division or modulo by zero");
                if (x == std::numeric_limits<std::int64_t>::min() && y == -1) fail("integer overflow");
                return Value::integer(floorDiv(x, y));
            case '%':
                if (y == 0) fail("integer division or modulo by zero");
                if (y == -1) return Value::integer(0);
                return Value::integer(floorMod(x, y));
            case 'p': {
                if (y < 0) return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
                // 0, 1 and -1 stay small for any exponent; any other base
                // overflows within 63 multiplications.
                if (x == 0) return Value::integer(y == 0 ? 1 : 0);
                if (x == 1) return Value::integer(1);
                if (x == -1) return Value::integer(y % 2 == 0 ? 1 : -1);
                std::int64_t result = 1;
                for (std::int64_t i = 0; i < y; ++i) {
                    if (__builtin_mul_overflow(result, x, &result)) fail("integer overflow");
                }
                return Value::integer(result);
            }
            default: return unsupported();
        }
    }
    const double x = floatOf(a);
    const double y = floatOf(b);
    switch (op) {
        case '+': return Value::floating(x + y);
        case '-': return Value::floating(x - y);
        case '*': return Value::floating(x * y);
        case '/':
            if (y == 0.0) fail("float division by zero");
            return Value::floating(x / y);
        case 'f':
            if (y == 0.0) fail("float floor division by zero");
            return Value::floating(std::floor(x / y));
        case '%':
            if (y == 0.0) fail("float modulo");
            return Value::floating(floatMod(x, y));
        case 'p': return Value::floating(std::pow(x, y));
        default: return unsupported();
    }
}

}  // namespace dpgate::admission::jinja
