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
// would refuse it. Whatever the template and the request, a render is
// bounded (RenderLimits): the bytes it builds (sized before they are built),
// the prompt, its work in steps, and its depth (nesting of the template,
// macro calls, values), so it ends with the output or a refusal naming the
// bound, never with an exception, an exhausted stack or memory.
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
    bool limit = false;   // one of RenderLimits, not the template, stopped the render
};

// Thrown inside a render; render() turns it into a RenderError.
struct TemplateError {
    std::string message;
    bool raised = false;
    bool limit = false;
};

// Macro calls (and caller() bodies) in progress at once. Python's Jinja2
// stops near 200 (each call costs several of its 1,000 frames); the bound is
// lower so that the deepest macro recursion fits kMaxRenderNesting.
inline constexpr unsigned kMaxMacroDepth = 100;

// Statements, expressions, calls and filter callbacks being evaluated at
// once. Each costs about 300 bytes of the thread's stack in an optimized
// build (a macro recursing through `if` and `{{ }}` is 4 levels and 1.1 KiB
// per call; render_depth_test.cpp measures), so the render stays under
// about 160 KiB of stack whatever the template and the request. The parser
// bounds a template's own nesting (kMaxTemplateNesting); this bounds what
// macro recursion multiplies it into.
inline constexpr unsigned kMaxRenderNesting = 512;

// The stack a render may use, checked beside kMaxRenderNesting in case some
// path costs more per level than measured. AddressSanitizer's frames are
// about six times larger (redzones around every local; measured).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr std::size_t kRenderStackBytes = 6 * (192u << 10);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr std::size_t kRenderStackBytes = 6 * (192u << 10);
#else
inline constexpr std::size_t kRenderStackBytes = 192u << 10;
#endif
#else
inline constexpr std::size_t kRenderStackBytes = 192u << 10;
#endif

// What one render may do. Every bound ends the render with a RenderError
// naming it (RenderError::limit), never with an exception or a crash.
struct RenderLimits {
    // Bytes the render may add to its arena (every value and string it
    // builds), and the size any text built outside the arena (a join, a
    // tojson, padding) may reach before it lands there. 0: no limit.
    std::size_t arena_bytes = 0;
    // The rendered prompt, and the text of the macro, caller and block-set
    // bodies being captured at the same time.
    std::size_t output_bytes = 1u << 30;
    std::uint64_t steps = 50'000'000;  // WorkBudget
    unsigned max_call_depth = kMaxMacroDepth;
    unsigned max_nesting = kMaxRenderNesting;
    // A backstop under max_nesting: the stack the render may use below the
    // frame of render(), whatever the build makes frames cost.
    std::size_t stack_bytes = kRenderStackBytes;

    // The bounds for a request of `body_bytes`: enough for real templates
    // (tool definitions printed with tojson(indent=4) of deep schemas, long
    // conversations) with a wide margin, linear in the body, so a small
    // request cannot make a render take seconds or build gigabytes.
    static RenderLimits forRequest(std::size_t body_bytes);
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
    // Stops the render (the arena's limit) unless text of `bytes` would fit:
    // for text built outside the arena before it lands there. `what` names
    // the operation in the refusal ("tojson indent").
    void ensureRoom(std::size_t bytes, const char* what = nullptr) const { arena_.ensureRoom(bytes, what); }
    [[noreturn]] void fail(std::string message) const;
    // Charges the work budget: one step, or one per element / 16 bytes an
    // operation goes through (a step is some tens of nanoseconds of work).
    void step(std::uint64_t steps = 1) { work_.charge(steps); }
    static std::uint64_t scanSteps(std::size_t bytes) { return 1 + (bytes >> 4); }
    WorkBudget& work() { return work_; }
    // One more level of evaluation (a statement, an expression, a call, a
    // filter a filter runs) for as long as the guard lives; fails past
    // RenderLimits::max_nesting or stack_bytes.
    class Nesting {
    public:
        // `levels`: what this kind of call costs, in levels of about 300
        // bytes of stack.
        explicit Nesting(Renderer& r, unsigned levels = 1) : r_(r), levels_(levels) {
            r_.nesting_ += levels;
            if (r_.nesting_ > r_.limits_.max_nesting || r_.stackUsed() > r_.limits_.stack_bytes) r_.failNesting();
        }
        ~Nesting() { r_.nesting_ -= levels_; }
        Nesting(const Nesting&) = delete;
        Nesting& operator=(const Nesting&) = delete;

    private:
        Renderer& r_;
        unsigned levels_;
    };
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
    // The same as a list: a list itself, a dict's keys in place, a string's
    // characters in the arena.
    Value sequence(const Value& v);
    // Counts `bytes` held outside the arena (copies a call keeps while it
    // runs, nested calls each their own) against the arena's room; fails
    // (ArenaLimitExceeded, naming `what`) when they would not fit.
    void hold(std::size_t bytes, const char* what) {
        if (bytes > Arena::kMaxBytes - held_bytes_) ensureRoom(Arena::kMaxBytes + 1, what);
        ensureRoom(held_bytes_ + bytes, what);
        held_bytes_ += bytes;
    }
    void release(std::size_t bytes) { held_bytes_ -= bytes; }
    // hold() for as long as it lives.
    class Held {
    public:
        Held(Renderer& r, std::size_t bytes, const char* what) : r_(r), bytes_(bytes) { r_.hold(bytes, what); }
        ~Held() { r_.release(bytes_); }
        Held(const Held&) = delete;
        Held& operator=(const Held&) = delete;

    private:
        Renderer& r_;
        std::size_t bytes_;
    };
    // Jinja's environment.getattr / getitem (attribute first / item first).
    Value getattr(const Value& obj, std::string_view name);
    Value getitem(const Value& obj, const Value& key);
    // Calls a callable value (macro, global, bound method).
    Value call(const Value& callee, const CallArgs& args);
    // Runs a test or filter by name (select/map arguments name them at render time).
    bool runTest(std::string_view name, const Value& value, const CallArgs& args);
    Value runFilter(std::string_view name, const Value& value, const CallArgs& args);
    // Python comparisons and arithmetic, as the interpreter applies them.
    bool equals(const Value& a, const Value& b) { return pyEquals(a, b, &work_); }
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

    [[noreturn]] void failNesting() const;
    std::size_t stackUsed() const {
        const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
        return here < stack_base_ ? stack_base_ - here : 0;
    }

    const Template& t_;
    Arena& arena_;
    RenderLimits limits_;
    std::vector<Value> globals_;  // by name id: template-level variables and context
    std::int64_t now_unix_seconds_ = 0;
    WorkBudget work_;
    std::size_t held_bytes_ = 0;
    unsigned nesting_ = 0;
    unsigned call_depth_ = 0;
    std::uintptr_t stack_base_ = 0;  // the frame of render()
    std::string scratch_;
    // Buffers the interpreter borrows and returns (a stack, as calls nest),
    // kept across renders so a render allocates nothing once warm.
    std::vector<std::unique_ptr<std::string>> capture_pool_;
    std::vector<std::unique_ptr<CallArgs>> args_pool_;
};

}  // namespace dpgate::admission::jinja
