#pragma once
// Python methods a template calls on str, dict and list values
// (`message.content.startswith('<think>')`, `tool.items()`). Methods that
// would modify a list or dict exist but fail when called, as in the
// ImmutableSandboxedEnvironment ("access to attribute 'append' of 'list'
// object is unsafe.").
#include <cstdint>
#include <optional>
#include <string_view>

#include "admission/template/jinja/render.hpp"

namespace dpgate::admission::jinja {

enum class MethodId : std::uint8_t {
    // str
    str_startswith,
    str_endswith,
    str_split,
    str_rsplit,
    str_splitlines,
    str_strip,
    str_lstrip,
    str_rstrip,
    str_upper,
    str_lower,
    str_title,
    str_capitalize,
    str_swapcase,
    str_casefold,
    str_replace,
    str_find,
    str_rfind,
    str_index,
    str_rindex,
    str_count,
    str_join,
    str_isdigit,
    str_isalpha,
    str_isalnum,
    str_isspace,
    str_isupper,
    str_islower,
    str_isdecimal,
    str_isnumeric,
    str_istitle,
    str_center,
    str_ljust,
    str_rjust,
    str_zfill,
    str_partition,
    str_rpartition,
    str_removeprefix,
    str_removesuffix,
    str_format,
    // dict
    dict_get,
    dict_items,
    dict_keys,
    dict_values,
    dict_copy,
    // list
    list_count,
    list_index,
    list_copy,
    // any method that would mutate: refused when called
    unsafe,
};

// Whether `name` is a method of dict (attribute access finds it before a key).
bool isDictMethodName(std::string_view name);

// The method `name` of `object`'s type, if it has one.
std::optional<MethodId> findMethod(const Value& object, std::string_view name);
Value callMethod(Renderer& r, MethodId method, std::string_view name, const Value& self, const CallArgs& args);

}  // namespace dpgate::admission::jinja
