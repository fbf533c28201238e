// Jinja2's builtin tests (`x is string`, `x is defined`...), as
// jinja2/tests.py defines them on Python's types: bool is a number but not
// an integer test's int; a str, list, dict or Undefined is a sequence.
#include "admission/template/jinja/builtins.hpp"
#include "admission/template/jinja/callable.hpp"
#include "admission/template/jinja/py_text.hpp"
#include "admission/template/jinja/render.hpp"

namespace dpgate::admission::jinja {

namespace {

using Args = CallArgs;

const Value& requireArg(Renderer& r, const Args& args, std::size_t index, std::string_view name,
                        std::string_view test) {
    const Value* v = args.get(index, name);
    if (v == nullptr) r.fail("test '" + std::string(test) + "' needs an argument");
    return *v;
}

bool tDefined(Renderer&, const Value& v, const Args&) { return !v.isUndefined(); }
bool tUndefined(Renderer&, const Value& v, const Args&) { return v.isUndefined(); }
bool tNone(Renderer&, const Value& v, const Args&) { return v.isNone(); }
bool tBoolean(Renderer&, const Value& v, const Args&) { return v.isBool(); }
bool tTrue(Renderer&, const Value& v, const Args&) { return v.isBool() && v.asBool(); }
bool tFalse(Renderer&, const Value& v, const Args&) { return v.isBool() && !v.asBool(); }
bool tInteger(Renderer&, const Value& v, const Args&) { return v.isInt(); }
bool tFloat(Renderer&, const Value& v, const Args&) { return v.isFloat(); }
bool tNumber(Renderer&, const Value& v, const Args&) { return v.isNumber(); }
bool tString(Renderer&, const Value& v, const Args&) { return v.isString(); }
bool tMapping(Renderer&, const Value& v, const Args&) { return v.isDict(); }
bool tSequence(Renderer&, const Value& v, const Args&) {
    return v.isString() || v.isList() || v.isDict() || v.isUndefined();
}
bool tIterable(Renderer&, const Value& v, const Args&) {
    return v.isString() || v.isList() || v.isDict() || v.isUndefined();
}
bool tCallable(Renderer&, const Value& v, const Args&) { return v.isCallable(); }
bool tEscaped(Renderer&, const Value&, const Args&) { return false; }

bool integerParity(Renderer& r, const Value& v, std::int64_t remainder) {
    const Value m = r.binary('%', v, Value::integer(2));
    return r.equals(m, Value::integer(remainder));
}
bool tOdd(Renderer& r, const Value& v, const Args&) { return integerParity(r, v, 1); }
bool tEven(Renderer& r, const Value& v, const Args&) { return integerParity(r, v, 0); }
bool tDivisibleby(Renderer& r, const Value& v, const Args& args) {
    const Value m = r.binary('%', v, requireArg(r, args, 0, "num", "divisibleby"));
    return r.equals(m, Value::integer(0));
}

bool tLower(Renderer& r, const Value& v, const Args&) { return pyIsLower(r.str(v)); }
bool tUpper(Renderer& r, const Value& v, const Args&) { return pyIsUpper(r.str(v)); }

bool tIn(Renderer& r, const Value& v, const Args& args) { return r.contains(requireArg(r, args, 0, "seq", "in"), v); }

// `is sameas`: identity. Python's small ints, None, True and False are
// singletons; other values are the same object only if they are the same
// container.
bool tSameas(Renderer& r, const Value& v, const Args& args) {
    const Value& other = requireArg(r, args, 0, "other", "sameas");
    if (v.kind() != other.kind()) return false;
    switch (v.kind()) {
        case ValueKind::none:
        case ValueKind::boolean:
        case ValueKind::integer: return r.equals(v, other);
        case ValueKind::list: return &v.asList() == &other.asList();
        case ValueKind::dict: return &v.asDict() == &other.asDict();
        case ValueKind::namespace_: return &v.asNamespace() == &other.asNamespace();
        case ValueKind::callable: return &v.asCallable() == &other.asCallable();
        case ValueKind::string: return v.text().data() == other.text().data() && v.text().size() == other.text().size();
        default: return false;
    }
}

bool tEq(Renderer& r, const Value& v, const Args& args) { return r.equals(v, requireArg(r, args, 0, "b", "eq")); }
bool tNe(Renderer& r, const Value& v, const Args& args) { return !r.equals(v, requireArg(r, args, 0, "b", "ne")); }
bool tLt(Renderer& r, const Value& v, const Args& args) {
    return r.compare(v, requireArg(r, args, 0, "b", "lt"), "<") == -1;
}
bool tLe(Renderer& r, const Value& v, const Args& args) {
    const int c = r.compare(v, requireArg(r, args, 0, "b", "le"), "<=");
    return c == -1 || c == 0;
}
bool tGt(Renderer& r, const Value& v, const Args& args) {
    return r.compare(v, requireArg(r, args, 0, "b", "gt"), ">") == 1;
}
bool tGe(Renderer& r, const Value& v, const Args& args) {
    const int c = r.compare(v, requireArg(r, args, 0, "b", "ge"), ">=");
    return c == 1 || c == 0;
}

bool tFilter(Renderer& r, const Value& v, const Args&) { return v.isString() && findFilter(r.str(v)) != nullptr; }
bool tTest(Renderer& r, const Value& v, const Args&) { return v.isString() && findTest(r.str(v)) != nullptr; }

struct TestEntry {
    std::string_view name;
    TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"!=", tNe},
    {"<", tLt},
    {"<=", tLe},
    {"==", tEq},
    {">", tGt},
    {">=", tGe},
    {"boolean", tBoolean},
    {"callable", tCallable},
    {"defined", tDefined},
    {"divisibleby", tDivisibleby},
    {"eq", tEq},
    {"equalto", tEq},
    {"escaped", tEscaped},
    {"even", tEven},
    {"false", tFalse},
    {"filter", tFilter},
    {"float", tFloat},
    {"ge", tGe},
    {"greaterthan", tGt},
    {"gt", tGt},
    {"in", tIn},
    {"integer", tInteger},
    {"iterable", tIterable},
    {"le", tLe},
    {"lessthan", tLt},
    {"lower", tLower},
    {"lt", tLt},
    {"mapping", tMapping},
    {"ne", tNe},
    {"none", tNone},
    {"number", tNumber},
    {"odd", tOdd},
    {"sameas", tSameas},
    {"sequence", tSequence},
    {"string", tString},
    {"test", tTest},
    {"true", tTrue},
    {"undefined", tUndefined},
    {"upper", tUpper},
};

}  // namespace

TestFn findTest(std::string_view name) {
    for (const TestEntry& entry : kTests) {
        if (entry.name == name) return entry.fn;
    }
    return nullptr;
}

}  // namespace dpgate::admission::jinja
