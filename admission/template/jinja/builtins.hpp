#pragma once
// The filters, tests and globals a template can use, resolved by name at
// parse time (as Jinja2 does: an unknown filter or test is a template
// error when the template is compiled, not when a request reaches it).
#include <string_view>

#include "admission/template/jinja/ast.hpp"

namespace dpgate::admission::jinja {

// Null when the name is not a filter / test this engine has.
FilterFn findFilter(std::string_view name);
TestFn findTest(std::string_view name);

}  // namespace dpgate::admission::jinja
