#pragma once
// Python's json module as the backend runs it: json.dumps is the templates'
// `tojson` filter (transformers replaces Jinja's with json.dumps(x,
// ensure_ascii=False, ...)), json.loads is how vLLM parses a tool call's
// `arguments`. Outputs and error messages follow CPython 3.11's C
// accelerated encoder and scanner (Modules/_json.c), which json uses.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "admission/template/jinja/arena.hpp"
#include "admission/template/jinja/value.hpp"

namespace dpgate::admission::jinja {

// Python refuses to convert an int of more digits than this to or from
// decimal text (sys.get_int_max_str_digits(), since 3.11 and the 3.10.7
// security release).
inline constexpr std::size_t kPyIntMaxStrDigits = 4300;

struct JsonDumpOptions {
    bool ensure_ascii = false;
    // None: compact, one line. Else the string repeated per nesting level
    // after each newline (Python's indent=n is n spaces; the caller converts,
    // and indent=0 is "", which still breaks lines).
    std::optional<std::string> indent;
    // Python's defaults: ", " without indent, "," with it; ": " always.
    std::optional<std::string> item_separator;
    std::optional<std::string> key_separator;
    bool sort_keys = false;
    // The Python class name of a callable, for the "not JSON serializable"
    // message ("Macro", "function", ...). Unset: "builtin_function_or_method".
    std::string_view (*callable_type_name)(const Value&) = nullptr;
    // When set, the dump throws ArenaLimitExceeded before its text would
    // outgrow this arena's room (a list holding the same list twice doubles
    // the text per level; every line of an indented dump repeats the indent
    // once per level).
    const Arena* room = nullptr;
    // When set, charged a step per value written (WorkLimitExceeded past it).
    WorkBudget* work = nullptr;
};

// json.dumps(value, ...) appended to `out`. On failure returns the message
// of the exception Python raises, and `out` is left as it was:
//   TypeError   "Object of type Undefined is not JSON serializable" (also
//               Namespace, and callables as callable_type_name says);
//               "keys must be str, int, float, bool or None, not tuple";
//               "'<' not supported between instances of 'str' and 'int'"
//               (sort_keys over keys that do not compare);
//   ValueError  an int of more than kPyIntMaxStrDigits digits;
//   RecursionError past kMaxValueDepth levels of nesting (Python stops near
//               1,000: its default limit less the frames the render uses).
// The dump keeps its own stack: any depth costs the thread's stack nothing.
std::optional<std::string> pyJsonDumps(const Value& value, const JsonDumpOptions& options, std::string& out);

struct JsonLoadError {
    std::string message;    // Python's JSONDecodeError text, "...: line 1 column 5 (char 4)"
    bool too_deep = false;  // nesting past kJsonMaxDepth (Python raises RecursionError)
};

// Python's scanner recurses per level and stops at its recursion limit; the
// loader keeps its own stack and stops here.
inline constexpr int kJsonMaxDepth = 512;

// json.loads(text). `text` is valid UTF-8 (the caller checked). Strings
// without escapes point into `text`, so the caller keeps it alive as long
// as `out` is used; everything else is allocated in `arena` (whose limit
// may throw ArenaLimitExceeded through this call).
//
// Python's results: whitespace is " \t\n\r"; NaN, Infinity, -Infinity are
// floats; integers are ints ("-0" is 0; past kPyIntMaxStrDigits digits,
// Python's ValueError text, without a position); a fraction or an
// exponent makes a float, correctly rounded, out of range -> inf or 0.0;
// raw control characters in strings are refused; a repeated key keeps its
// first position and takes its last value. Python also accepts a \uXXXX
// escape of a lone surrogate, which UTF-8 cannot hold: that is an error here
// ("Lone surrogate \ud800 cannot be represented in UTF-8: line 1 column 2
// (char 1)"), reported only when Python finds no other error in the text.
// After an error, `out` holds nothing useful.
std::optional<JsonLoadError> pyJsonLoads(std::string_view text, Arena& arena, Value& out);

// A JSON number token that a validating parser (simdjson) already accepted,
// as json.loads makes it: an int (big ints' digits copied into `arena`) or a
// float. Unlike pyJsonLoads, no limit on the digits of an int.
Value pyJsonNumber(std::string_view json_number_text, Arena& arena);

}  // namespace dpgate::admission::jinja
