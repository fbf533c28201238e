#pragma once
// The shapes of the character tables that gen_py_text_tables.py writes into
// py_text_tables.cpp. Only py_text.cpp reads them.
#include <cstddef>
#include <cstdint>

namespace dpgate::admission::jinja::py_text_tables {

// One bit per CPython character flag (Objects/unicodectype.c). The generator
// writes these names, so they are the contract between the two files.
enum : std::uint16_t {
    kSpace = 1u << 0,           // str.isspace
    kPrintable = 1u << 1,       // str.isprintable
    kAlpha = 1u << 2,           // str.isalpha
    kDecimal = 1u << 3,         // str.isdecimal
    kDigit = 1u << 4,           // str.isdigit
    kNumeric = 1u << 5,         // str.isnumeric
    kUpper = 1u << 6,           // Uppercase property (str.isupper of one character)
    kLower = 1u << 7,           // Lowercase property (str.islower of one character)
    kTitle = 1u << 8,           // general category Lt
    kCased = 1u << 9,           // what str.title() and the final-sigma rule call cased
    kCaseIgnorable = 1u << 10,  // what the final-sigma rule skips
    kLineBreak = 1u << 11,      // a str.splitlines() boundary
};

// Flags of the code points [first, next entry's first). Sorted, starts at 0.
struct PropertyRange {
    char32_t first;
    std::uint16_t flags;
};

// The code points first, first + stride, ..., last map to themselves + delta.
struct CaseRun {
    char32_t first;
    char32_t last;
    std::int32_t stride;
    std::int32_t delta;
};

// A mapping to up to three code points; unused slots are 0.
struct MultiCase {
    char32_t code_point;
    char32_t mapped[3];
};

extern const char kUnicodeVersion[];
extern const std::uint16_t kLatin1Flags[256];
extern const PropertyRange kPropertyRanges[];
extern const std::size_t kPropertyRangesCount;
// str.upper and str.lower of one code point: a MultiCase entry when the
// result has several code points, else a CaseRun, else the code point itself.
extern const CaseRun kUpperRuns[];
extern const std::size_t kUpperRunsCount;
extern const MultiCase kUpperMulti[];
extern const std::size_t kUpperMultiCount;
extern const CaseRun kLowerRuns[];
extern const std::size_t kLowerRunsCount;
extern const MultiCase kLowerMulti[];
extern const std::size_t kLowerMultiCount;
// str.title of one code point where it differs from str.upper.
extern const MultiCase kTitleOverrides[];
extern const std::size_t kTitleOverridesCount;

}  // namespace dpgate::admission::jinja::py_text_tables
