#pragma once
// The parsed template: expression and statement nodes as Jinja2's parser
// builds them (the node kinds keep Jinja's names, so vLLM's content-format
// detection, which walks Jinja's tree, can walk this one the same way).
// Nodes are owned by their Template and never change after parsing:
// templates are shared by every thread that renders them.
#include <cstdint>
#include <string_view>
#include <vector>

#include "admission/template/jinja/value.hpp"

namespace dpgate::admission::jinja {

class Renderer;
struct CallArgs;

// A filter or test implementation: `input | name(args)`.
using FilterFn = Value (*)(Renderer&, const Value& input, const CallArgs& args);
using TestFn = bool (*)(Renderer&, const Value& input, const CallArgs& args);

enum class ExprKind : std::uint8_t {
    constant,
    name,     // load of `name`
    getattr,  // a.name
    getitem,  // a[b] (b may be a slice)
    slice,    // a:b:c inside [], each optional
    call,     // a(items..., kwargs...)
    filter,   // a | name(items..., kwargs...); `a` null in filter blocks and block sets
    test,     // a is name(items...)
    cond,     // b if a else c   (c optional: undefined)
    and_,
    or_,
    not_,
    compare,  // a op0 items[0] op1 items[1] ...
    add,
    sub,
    mul,
    div,
    floordiv,
    mod,
    pow,
    neg,
    pos,
    concat,  // items joined with ~
    list,
    tuple,
    dict,  // items: key0, value0, key1, value1, ...
};

enum class CompareOp : std::uint8_t { eq, ne, lt, lteq, gt, gteq, in, notin };

struct Expr {
    ExprKind kind;
    int line = 0;
    Value constant;             // constant
    std::string_view name;      // name, getattr attribute, filter/test name, keyword
    std::uint32_t name_id = 0;  // name: interned variable id
    const Expr* a = nullptr;
    const Expr* b = nullptr;
    const Expr* c = nullptr;
    std::vector<const Expr*> items;               // arguments, elements, compare operands
    std::vector<std::string_view> keyword_names;  // call/filter/test keyword arguments...
    std::vector<const Expr*> keyword_values;      // ...and their values
    const Expr* dyn_args = nullptr;               // *args
    const Expr* dyn_kwargs = nullptr;             // **kwargs
    std::vector<CompareOp> ops;                   // compare
    FilterFn filter = nullptr;
    TestFn test = nullptr;
    // getattr / getitem with a constant string: whether the name is a method
    // of dict (looked up at parse time, as attribute access tries methods
    // before keys), so a dict lookup needs no method search.
    bool names_dict_method = false;
};

enum class StmtKind : std::uint8_t {
    output,  // data and {{ expressions }} in order
    for_,
    if_,
    assign,        // {% set target = expr %}
    assign_block,  // {% set target | filter %}body{% endset %}
    macro,
    call_block,
    filter_block,
    with,
    break_,
    continue_,
    scope,  // a body run in place ({% generation %})
};

// What a `set` or `for` assigns to.
struct Target {
    enum class Kind : std::uint8_t { name, tuple, ns_attr } kind = Kind::name;
    std::string_view name;  // name, or the namespace variable of ns_attr
    std::uint32_t name_id = 0;
    std::string_view attr;      // ns_attr
    std::vector<Target> items;  // tuple
};

struct Stmt;
using Body = std::vector<const Stmt*>;

struct OutputItem {
    std::string_view data;  // template text when `expr` is null
    const Expr* expr = nullptr;
};

struct MacroArg {
    std::string_view name;
    std::uint32_t name_id = 0;
    const Expr* default_value = nullptr;
};

struct Stmt {
    StmtKind kind;
    int line = 0;
    std::vector<OutputItem> output;     // output
    Target target;                      // for, assign, assign_block
    const Expr* expr = nullptr;         // for: iterable; if: test; assign: value; call_block: the call;
                                        // filter_block/assign_block: filter chain
    const Expr* loop_filter = nullptr;  // for ... if cond
    bool recursive = false;
    Body body;
    Body else_body;  // for/else, if/else
    std::vector<std::pair<const Expr*, Body>> elifs;
    std::string_view name;  // macro name
    std::uint32_t name_id = 0;
    std::vector<MacroArg> args;  // macro / call block parameters
    bool uses_caller = false;    // macro body refers to `caller`
    bool uses_loop = true;       // for: the body (or else) refers to `loop`
    bool uses_varargs = false;
    bool uses_kwargs = false;
    std::vector<Target> with_targets;  // with
    std::vector<const Expr*> with_values;
};

}  // namespace dpgate::admission::jinja
