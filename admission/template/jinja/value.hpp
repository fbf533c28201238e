#pragma once
// A value as a chat template sees it. HF chat templates run in Python's
// Jinja2 over Python objects (the request after json.loads and vLLM's
// preprocessing), so values follow Python's types: None, bool, int
// (arbitrary precision), float, str, list (and tuple), dict (insertion
// ordered), plus Jinja's Undefined, callables and namespaces.
//
// A Value is 24 bytes, trivially copyable and never owns memory: strings,
// lists and dicts point into an Arena (or into the request body / template
// source, which outlive the render). Lists and dicts are immutable, as in
// the ImmutableSandboxedEnvironment transformers renders with; a namespace
// is the one mutable object.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "admission/template/jinja/arena.hpp"

namespace dpgate::admission::jinja {

struct ListData;
struct DictData;
struct NamespaceData;
struct CallableData;

enum class ValueKind : std::uint8_t {
    undefined,
    none,
    boolean,
    integer,      // fits int64
    big_integer,  // beyond int64: kept as its canonical decimal text ("-123...")
    floating,
    string,
    list,
    dict,
    namespace_,
    callable,
};

class Value {
public:
    Value() : kind_(ValueKind::undefined) { u_.text = {nullptr, 0}; }

    // `hint` names what was missing ("'x' is undefined"), for error messages.
    static Value undefined(std::string_view hint = {}) {
        Value v;
        v.u_.text = {hint.data(), hint.size()};
        return v;
    }
    static Value none() { return Value(ValueKind::none); }
    static Value boolean(bool b) {
        Value v(ValueKind::boolean);
        v.u_.b = b;
        return v;
    }
    static Value integer(std::int64_t i) {
        Value v(ValueKind::integer);
        v.u_.i = i;
        return v;
    }
    // `digits`: canonical decimal text of an integer outside int64 (no
    // leading zeros, "-" for negatives). Not copied.
    static Value bigInteger(std::string_view digits) {
        Value v(ValueKind::big_integer);
        v.u_.text = {digits.data(), digits.size()};
        return v;
    }
    static Value floating(double f) {
        Value v(ValueKind::floating);
        v.u_.f = f;
        return v;
    }
    // Valid UTF-8, not copied: the bytes must outlive the render.
    static Value string(std::string_view text) {
        Value v(ValueKind::string);
        v.u_.text = {text.data(), text.size()};
        return v;
    }
    static Value list(const ListData* list) {
        Value v(ValueKind::list);
        v.u_.list = list;
        return v;
    }
    static Value dict(const DictData* dict) {
        Value v(ValueKind::dict);
        v.u_.dict = dict;
        return v;
    }
    static Value namespace_(NamespaceData* ns) {
        Value v(ValueKind::namespace_);
        v.u_.ns = ns;
        return v;
    }
    static Value callable(const CallableData* callable) {
        Value v(ValueKind::callable);
        v.u_.callable = callable;
        return v;
    }

    ValueKind kind() const { return kind_; }
    bool isUndefined() const { return kind_ == ValueKind::undefined; }
    bool isNone() const { return kind_ == ValueKind::none; }
    bool isBool() const { return kind_ == ValueKind::boolean; }
    bool isInt() const { return kind_ == ValueKind::integer || kind_ == ValueKind::big_integer; }
    bool isFloat() const { return kind_ == ValueKind::floating; }
    bool isNumber() const { return isInt() || isFloat() || isBool(); }
    bool isString() const { return kind_ == ValueKind::string; }
    bool isList() const { return kind_ == ValueKind::list; }
    bool isDict() const { return kind_ == ValueKind::dict; }
    bool isNamespace() const { return kind_ == ValueKind::namespace_; }
    bool isCallable() const { return kind_ == ValueKind::callable; }

    bool asBool() const { return u_.b; }
    std::int64_t asInt() const { return u_.i; }
    double asFloat() const { return u_.f; }
    // The string's bytes, the big integer's digits, or the undefined's hint.
    std::string_view text() const { return {u_.text.data, u_.text.size}; }
    const ListData& asList() const { return *u_.list; }
    const DictData& asDict() const { return *u_.dict; }
    NamespaceData& asNamespace() const { return *u_.ns; }
    const CallableData& asCallable() const { return *u_.callable; }

private:
    explicit Value(ValueKind kind) : kind_(kind) { u_.text = {nullptr, 0}; }

    struct Text {
        const char* data;
        std::size_t size;
    };
    ValueKind kind_;
    union {
        bool b;
        std::int64_t i;
        double f;
        Text text;
        const ListData* list;
        const DictData* dict;
        NamespaceData* ns;
        const CallableData* callable;
    } u_;
};

// A list or a tuple (they differ only in how str() shows them).
struct ListData {
    const Value* items;
    std::size_t size;
    bool tuple;

    const Value* begin() const { return items; }
    const Value* end() const { return items + size; }
};

// An insertion-ordered dict. Keys are usually strings (JSON objects,
// template literals); lookups by string key use `index` when present
// (open addressing over string keys, built for larger dicts).
struct DictData {
    const Value* keys;
    const Value* values;
    std::size_t size;
    const std::uint32_t* index;  // nullable; slots hold entry + 1, 0 = empty
    std::size_t index_mask;      // slot count - 1

    // The value stored under string key `key`, or null.
    const Value* find(std::string_view key) const;
};

// {% set ns = namespace(...) %}: attributes assignable with `set ns.x = ...`.
struct NamespaceData {
    std::string_view* names;
    Value* values;
    std::size_t size;
    std::size_t capacity;

    const Value* find(std::string_view name) const;
    void set(Arena& arena, std::string_view name, Value value);  // `name` must outlive the render
};

// Hash of a string key as DictData's index uses it.
std::uint64_t dictKeyHash(std::string_view key);

// Builds a list in the arena.
class ListBuilder {
public:
    explicit ListBuilder(Arena& arena, std::size_t reserve = 4);
    void push(Value value);
    std::size_t size() const { return size_; }
    Value finish(bool tuple = false);

private:
    Arena& arena_;
    Value* items_;
    std::size_t size_ = 0;
    std::size_t capacity_;
};

// Builds a dict in the arena with Python's dict semantics: a key set twice
// keeps its first position and takes the last value (what json.loads does
// with a repeated key in an object).
class DictBuilder {
public:
    explicit DictBuilder(Arena& arena, std::size_t reserve = 4);
    // Keys are compared with Python's equality for str, int, float, bool and None.
    void set(Value key, Value value);
    void set(std::string_view key, Value value) { set(Value::string(key), value); }
    std::size_t size() const { return size_; }
    Value finish();

private:
    std::size_t findKey(const Value& key) const;  // size_ when absent
    void rebuildIndex();

    Arena& arena_;
    Value* keys_;
    Value* values_;
    std::size_t size_ = 0;
    std::size_t capacity_;
    // While building: open-addressing index over string keys once the dict
    // is larger than a few entries (a 10,000-key object must not cost 10^8).
    std::uint32_t* index_ = nullptr;
    std::size_t index_mask_ = 0;
    bool all_string_keys_ = true;
};

// Every walk over a value's nesting (==, <, repr, tojson, hashing) stops
// this deep, as Python stops at its recursion limit (1,000 frames): rounded
// up, so that whatever the request's JSON depth limit admits (at most 1,000
// levels) renders. The walks keep their own stacks on the heap: no depth
// costs the thread's stack.
inline constexpr std::size_t kMaxValueDepth = 1024;

// Thrown by a walk over a value nested deeper than kMaxValueDepth, where
// Python raises RecursionError("maximum recursion depth exceeded <what>").
struct ValueTooDeep {
    std::string_view what;  // "in comparison", "while encoding a JSON object", ...
};

// Thrown when a render has done the work it may do (WorkBudget).
struct WorkLimitExceeded {
    std::uint64_t limit;
};

// The work one render may do, in steps: a statement, a loop iteration, a
// call, an element an operation visits, 16 bytes it scans. Walks over values
// charge as they go, so a value that shares its parts (a list holding the
// same list twice, 40 levels deep, is 2^40 elements to compare) stops at
// the budget rather than after the walk.
struct WorkBudget {
    std::uint64_t used = 0;
    std::uint64_t limit = UINT64_MAX;

    void charge(std::uint64_t steps) {
        used += steps;
        if (used > limit) throw WorkLimitExceeded{limit};
    }
};

// Python's == for the scalar kinds, and structural equality of lists and
// dicts (1 == 1.0 == True; "a" != 1). Undefined equals only Undefined.
// Charges `work` (when given) one step per element compared; throws
// ValueTooDeep past kMaxValueDepth levels, counting `depth` levels a caller
// already went down to reach `a` and `b`.
bool pyEquals(const Value& a, const Value& b, WorkBudget* work = nullptr, std::size_t depth = 0);

// What keeps Python from hashing `v` (a dict key, a set member): `v` if it
// is a list or a dict, the first list or dict inside a tuple, or null when
// it hashes. Throws ValueTooDeep past kMaxValueDepth.
const Value* pyUnhashablePart(const Value& v);

}  // namespace dpgate::admission::jinja
