#pragma once
// Renders a parsed Template with Python Jinja2's semantics (the sandboxed,
// immutable environment transformers uses): Undefined that renders as ""
// but fails when used, Python's str()/repr() of values, Python's arithmetic
// and comparisons, Jinja's scoping (a loop iteration is its own scope;
// namespaces carry state out of loops).
//
// A template error (raise_exception, an operation Python would refuse, an
// undefined value used) ends the render with the message Jinja would give;
// the request it came from is refused with that message, as the backend
// would refuse it. Work is bounded: the arena's byte limit and a step budget
// stop a template that a request drives into quadratic work.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/template/jinja/template.hpp"
#include "admission/template/jinja/value.hpp"

namespace dpgate::admission::jinja {

struct RenderError {
    std::string message;
    bool raised = false;  // raise_exception(...) from the template itself
    bool limit = false;   // the work bound, not the template, stopped the render
};

// Thrown inside a render; render() turns it into a RenderError.
struct TemplateError {
    std::string message;
    bool raised = false;
};

struct RenderLimits {
    std::size_t arena_bytes = 0;       // 0: no limit (see Arena::setLimit)
    std::uint64_t steps = 50'000'000;  // expression evaluations and loop iterations
    std::size_t output_bytes = 1u << 30;
    unsigned max_call_depth = 256;  // macro recursion
};

// Arguments of a filter, test, method or global call.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string_view, Value>> keywords;

    // Python's parameter binding for one parameter: positional `index`, or
    // keyword `name`; null when neither was given.
    const Value* get(std::size_t index, std::string_view name) const;
    const Value* keyword(std::string_view name) const;
    std::size_t size() const { return positional.size() + keywords.size(); }
};

struct Scope;

class Renderer {
public:
    Renderer(const Template& tpl, Arena& arena, const RenderLimits& limits = {});
    ~Renderer();
    Renderer(const Renderer&) = delete;
    Renderer& operator=(const Renderer&) = delete;

    // Back to the template's globals and no variables set: a Renderer is
    // kept and reused across renders (its buffers with it).
    void reset();
    void setLimits(const RenderLimits& limits) { limits_ = limits; }
    // A template variable (messages, tools, bos_token, ...). Names the
    // template never mentions are ignored.
    void setVariable(std::string_view name, Value value);
    // The same by interned id (Template::nameId; kNoName is ignored).
    void setVariable(std::uint32_t id, Value value) {
        if (id != Template::kNoName) globals_[id] = value;
    }
    // The unix time strftime_now() formats (UTC).
    void setNow(std::int64_t unix_seconds) { now_unix_seconds_ = unix_seconds; }

    // Appends the rendered text to `out`.
    std::optional<RenderError> render(std::string& out);

    // --- for the builtins ---------------------------------------------------
    Arena& arena() { return arena_; }
    // Stops the render (the arena's limit) unless `bytes` more would fit:
    // for text built outside the arena before it lands there.
    void ensureRoom(std::size_t bytes) const { arena_.ensureRoom(bytes); }
    [[noreturn]] void fail(std::string message) const;
    void step();
    std::int64_t now() const { return now_unix_seconds_; }

    // Python's str(), repr() and truth value.
    std::string_view str(const Value& v);
    void appendStr(const Value& v, std::string& out);
    void appendRepr(const Value& v, std::string& out);
    bool truthy(const Value& v) const;
    // A string in the arena.
    Value makeString(std::string_view text) { return Value::string(arena_.copy(text)); }
    // The items of an iterable as Python's iter() gives them (dict: keys;
    // str: characters; Undefined: nothing); fails for non-iterables.
    void iterate(const Value& v, std::vector<Value>& items);
    // Jinja's environment.getattr / getitem (attribute first / item first).
    Value getattr(const Value& obj, std::string_view name);
    Value getitem(const Value& obj, const Value& key);
    // Calls a callable value (macro, global, bound method).
    Value call(const Value& callee, const CallArgs& args);
    // Runs a test or filter by name (select/map arguments name them at render time).
    bool runTest(std::string_view name, const Value& value, const CallArgs& args);
    Value runFilter(std::string_view name, const Value& value, const CallArgs& args);
    // Python comparisons and arithmetic, as the interpreter applies them.
    bool equals(const Value& a, const Value& b) const;
    int compare(const Value& a, const Value& b, std::string_view op);  // <0, 0, >0; fails when Python would
    bool contains(const Value& container, const Value& item);
    Value binary(char op, const Value& a, const Value& b);  // '+' '-' '*' '/' 'f'(//) '%' 'p'(**)
    // Python's type name ("str", "int", "NoneType", "list", ...).
    static std::string_view typeName(const Value& v);
    // Fails with the undefined's message (using an undefined value).
    [[noreturn]] void failUndefined(const Value& v) const;

private:
    friend struct Interpreter;
    struct Frame;

    const Template& t_;
    Arena& arena_;
    RenderLimits limits_;
    std::vector<Value> globals_;  // by name id: template-level variables and context
    std::int64_t now_unix_seconds_ = 0;
    std::uint64_t steps_ = 0;
    std::string scratch_;
    // Buffers the interpreter borrows and returns (a stack, as calls nest),
    // kept across renders so a render allocates nothing once warm.
    std::vector<std::unique_ptr<std::string>> capture_pool_;
    std::vector<std::unique_ptr<std::vector<Value>>> list_pool_;
    std::vector<std::unique_ptr<CallArgs>> args_pool_;
};

}  // namespace dpgate::admission::jinja
