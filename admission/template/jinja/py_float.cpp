#include "admission/template/jinja/py_float.hpp"

#include <charconv>
#include <cmath>
#include <string_view>
#include <system_error>

namespace dpgate::admission::jinja {

void appendPyFloatRepr(double value, std::string& out) {
    if (std::isnan(value)) {
        out += "nan";
        return;
    }
    if (std::isinf(value)) {
        out += value < 0 ? "-inf" : "inf";
        return;
    }
    // std::to_chars without a precision gives the shortest round-trip digits,
    // the nearest to the exact value among those, as Python's repr (David
    // Gay's mode 0) does; only the layout differs.
    char buf[64];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    if (ec != std::errc()) return;  // 64 bytes hold any double ("-d.dddddddddddddddde-308")
    const std::string_view sci(buf, static_cast<std::size_t>(end - buf));

    const bool negative = sci[0] == '-';
    const std::size_t mantissa_at = negative ? 1 : 0;
    const std::size_t e_at = sci.find('e');
    char digits[24];  // at most 17 significant digits
    int count = 0;
    for (std::size_t i = mantissa_at; i < e_at; ++i) {
        if (sci[i] != '.') digits[count++] = sci[i];
    }
    // The exponent always has a sign and at least two digits ("e+16", "e-07").
    int exponent = 0;
    std::from_chars(sci.data() + e_at + 2, sci.data() + sci.size(), exponent);
    if (sci[e_at + 1] == '-') exponent = -exponent;

    if (negative) out += '-';
    if (exponent < -4 || exponent >= 16) {
        // to_chars' scientific layout is Python's: "1e-05", "1.5e+300".
        out.append(sci.substr(mantissa_at));
        return;
    }
    const int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
        out += "0.";
        out.append(static_cast<std::size_t>(-point), '0');
        out.append(digits, static_cast<std::size_t>(count));
    } else if (point >= count) {
        out.append(digits, static_cast<std::size_t>(count));
        out.append(static_cast<std::size_t>(point - count), '0');
        out += ".0";
    } else {
        out.append(digits, static_cast<std::size_t>(point));
        out += '.';
        out.append(digits + point, static_cast<std::size_t>(count - point));
    }
}

std::string pyFloatRepr(double value) {
    std::string out;
    appendPyFloatRepr(value, out);
    return out;
}

}  // namespace dpgate::admission::jinja
