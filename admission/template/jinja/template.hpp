#pragma once
// A Jinja template parsed once (at config load) and rendered per request
// without re-parsing. Immutable after parse(): share it between threads.
//
// Supported, as HF chat templates use them under transformers' Jinja2
// environment: output, comments, whitespace control, raw; for (loop.*,
// else, filters on the iterable, tuple unpacking, break/continue), if/elif/
// else, set (incl. block set and namespace attributes), namespace(), macro
// and call (caller, default arguments, varargs/kwargs), filter blocks, with,
// {% generation %}; the expression grammar (literals, subscripts and
// slices, calls, filters, tests, inline if, and/or/not, comparisons incl.
// in / not in, arithmetic, ~). Not supported (a parse error names them):
// extends/block/include/import (a chat template is one file), recursive
// loops.
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "admission/template/jinja/ast.hpp"
#include "admission/template/jinja/callable.hpp"

namespace dpgate::admission::jinja {

// How deep a template may nest: blocks in blocks, brackets in brackets, the
// operands of chained operators, filters and subscripts (`a + b + c` is
// two levels, as Jinja2's tree has it). Python's Jinja2 stops near 75
// nested brackets and 20 nested for loops; real chat templates nest under
// 15. Parsing a level takes up to 1.5 KiB of stack (14 frames of the
// descent through the precedence levels), rendering one a few hundred
// bytes: the parser and every walk over the tree stay under 100 KiB.
inline constexpr unsigned kMaxTemplateNesting = 64;

class Template {
public:
    // Null with `error` set ("line 3: unexpected '}'") when `source` is not a
    // template this engine can render.
    static std::shared_ptr<const Template> parse(std::string_view source, std::string& error);

    const Body& body() const { return body_; }
    const std::string& source() const { return source_; }

    // Interned variable names: every name the template loads or stores.
    static constexpr std::uint32_t kNoName = 0xffffffffu;
    // Names every render may need, interned first (in this order) by parse().
    static constexpr std::uint32_t kCallerId = 0;
    static constexpr std::uint32_t kVarargsId = 1;
    static constexpr std::uint32_t kKwargsId = 2;
    static constexpr std::uint32_t kLoopId = 3;
    std::uint32_t nameId(std::string_view name) const;
    std::size_t nameCount() const { return names_.size(); }
    std::string_view nameOf(std::uint32_t id) const { return names_[id]; }
    // The value of every name before a render sets variables: the globals
    // (range, namespace, raise_exception, ...) where the template uses them,
    // undefined elsewhere. Their callables live in the template.
    const std::vector<Value>& baseGlobals() const { return base_globals_; }

    // Node storage, for the parser.
    Expr& newExpr(ExprKind kind, int line);
    Stmt& newStmt(StmtKind kind, int line);
    std::string_view keep(std::string text);
    std::uint32_t intern(std::string_view name);

private:
    Template() = default;
    friend class Parser;

    std::string source_;
    Body body_;
    std::deque<Expr> exprs_;
    std::deque<Stmt> stmts_;
    std::deque<std::string> strings_;
    std::vector<std::string_view> names_;
    std::deque<CallableData> global_callables_;
    std::vector<Value> base_globals_;
    std::unordered_map<std::string_view, std::uint32_t> name_ids_;
};

}  // namespace dpgate::admission::jinja
