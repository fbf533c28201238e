#pragma once
// What a callable Value points at: a macro, a `caller` of a call block, a
// global function, a method bound to its object, or a loop helper. Lives in
// the render's arena.
#include <cstdint>
#include <string_view>

#include "admission/template/jinja/ast.hpp"
#include "admission/template/jinja/value.hpp"

namespace dpgate::admission::jinja {

struct Scope {
    Scope* parent;
    std::uint32_t* ids;
    Value* values;
    std::size_t size;
    std::size_t capacity;
};

enum class GlobalFn : std::uint8_t { range, dict, namespace_, raise_exception, strftime_now, joiner, cycler, lipsum };

enum class MethodId : std::uint8_t;  // methods.hpp

struct CallableData {
    enum class Kind : std::uint8_t { macro, caller, global, method, loop_cycle, joiner_instance } kind;
    std::string_view name;
    const Stmt* stmt = nullptr;  // macro / call block
    Scope* closure = nullptr;    // macro: where it was defined; caller: where the call block is
    Value self;                  // method: the object it is bound to
    GlobalFn global = GlobalFn::range;
    MethodId method{};
    NamespaceData* state = nullptr;  // loop_cycle: the loop; joiner_instance: whether it was called
};

}  // namespace dpgate::admission::jinja
