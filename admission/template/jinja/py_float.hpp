#pragma once
// Python's repr(float), which templates see through str(), ~, {{ }} and
// tojson: the shortest digits that read back to the same double, in fixed
// notation for decimal exponents -4..15 ("0.0001", "100.0") and scientific
// outside ("1e-05", "1e+16").
#include <string>

namespace dpgate::admission::jinja {

// "inf", "-inf" and "nan" for the non-finite values, as repr() gives them.
std::string pyFloatRepr(double value);

// Appends pyFloatRepr(value) to `out`.
void appendPyFloatRepr(double value, std::string& out);

}  // namespace dpgate::admission::jinja
