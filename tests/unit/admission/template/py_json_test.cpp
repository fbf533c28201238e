// Python's json.dumps, json.loads and repr(float) as the template engine
// reproduces them: targeted cases, then differential runs against the real
// CPython (/usr/bin/python3) over seeded generated documents and doubles.
#include "admission/template/jinja/py_json.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "admission/template/jinja/py_float.hpp"

namespace {

using namespace dpgate::admission::jinja;
using namespace std::string_literals;

constexpr const char* kPython = "/usr/bin/python3";

// ------------------------------------------------------------------ helpers

std::string dumps(const Value& value, const JsonDumpOptions& options = {}) {
    std::string out;
    const auto error = pyJsonDumps(value, options, out);
    EXPECT_FALSE(error) << *error;
    return out;
}

std::string dumpError(const Value& value, const JsonDumpOptions& options = {}) {
    std::string out = "kept";
    const auto error = pyJsonDumps(value, options, out);
    EXPECT_EQ(out, "kept");  // a failed dump leaves the output as it was
    return error ? *error : "(no error)";
}

// json.dumps(json.loads(doc), options), or "error: <message>".
std::string reencode(std::string_view doc, const JsonDumpOptions& options = {}) {
    Arena arena;
    Value value;
    if (auto error = pyJsonLoads(doc, arena, value)) return "error: " + error->message;
    std::string out;
    if (auto error = pyJsonDumps(value, options, out)) return "dump error: " + *error;
    return out;
}

std::string loadError(std::string_view doc) {
    Arena arena;
    Value value;
    const auto error = pyJsonLoads(doc, arena, value);
    return error ? error->message : "(no error)";
}

JsonDumpOptions indented(std::string indent) {
    JsonDumpOptions options;
    options.indent = std::move(indent);
    return options;
}

std::string toHex(std::string_view bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
    return out;
}

std::string fromHex(std::string_view hex) {
    auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        out += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
    return out;
}

// Runs `script` with /usr/bin/python3 over `input` (one record a line) and
// returns its output lines. Records travel hex-encoded, so no newline or
// byte inside a document can confuse either side.
std::vector<std::string> runPython(const std::string& script, const std::string& input) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("dpgate_py_json_" + std::to_string(::getpid()) + "_" +
                                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "script.py") << script;
    std::ofstream(dir / "input.txt", std::ios::binary) << input;
    const std::string command =
        std::string(kPython) + " " + (dir / "script.py").string() + " " + (dir / "input.txt").string();
    std::vector<std::string> lines;
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
        std::string output;
        char buf[65536];
        std::size_t n = 0;
        while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
        const int status = ::pclose(pipe);
        EXPECT_EQ(status, 0) << "python failed";
        std::istringstream stream(output);
        for (std::string line; std::getline(stream, line);) lines.push_back(line);
    } else {
        ADD_FAILURE() << "popen failed";
    }
    std::filesystem::remove_all(dir);
    return lines;
}

// splitmix64: the same sequence on every platform and standard library.
struct Rng {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint64_t below(std::uint64_t n) { return next() % n; }
    bool chance(std::uint64_t percent) { return below(100) < percent; }
    template <typename T>
    const T& pick(const std::vector<T>& items) {
        return items[below(items.size())];
    }
};

void appendUtf8(std::uint32_t cp, std::string& out) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

// ------------------------------------------------------------- repr(float)

TEST(PyFloatRepr, Layout) {
    const std::vector<std::pair<double, std::string>> cases = {
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {1.0, "1.0"},
        {100.0, "100.0"},
        {0.1, "0.1"},
        {0.0001, "0.0001"},
        {0.00012345, "0.00012345"},
        {1e-5, "1e-05"},
        {-1.2345e-7, "-1.2345e-07"},
        {1e16, "1e+16"},
        {1.5e300, "1.5e+300"},
        {1234567890123456.0, "1234567890123456.0"},
        {9999999999999998.0, "9999999999999998.0"},
        {12345678901234567.0, "1.2345678901234568e+16"},
        {1e22, "1e+22"},
        {0.3, "0.3"},
        {2.5, "2.5"},
        {123.456, "123.456"},
        {5e-324, "5e-324"},
        {-5e-324, "-5e-324"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {std::numeric_limits<double>::infinity(), "inf"},
        {-std::numeric_limits<double>::infinity(), "-inf"},
        {std::numeric_limits<double>::quiet_NaN(), "nan"},
        {-std::numeric_limits<double>::quiet_NaN(), "nan"},
    };
    for (const auto& [value, expected] : cases) EXPECT_EQ(pyFloatRepr(value), expected) << expected;
}

// Doubles for the differential: random bit patterns, numbers with few
// decimal digits, and the neighbours of every layout boundary.
std::vector<double> floatCases(std::size_t random_count) {
    std::vector<double> out;
    auto around = [&](double x) {
        out.push_back(x);
        out.push_back(std::nextafter(x, 0.0));
        out.push_back(std::nextafter(x, std::numeric_limits<double>::infinity()));
        out.push_back(-x);
    };
    for (double x : {0.0, 5e-324, 1e-323, 2.2250738585072014e-308, 1e-310, 1e-5, 1e-4, 1e-3, 0.1, 1.0, 10.0, 1e15, 1e16,
                     1e17, 9007199254740992.0, 9223372036854775808.0, 1e22, 1e23, 1.7976931348623157e308}) {
        around(x);
    }
    out.push_back(std::numeric_limits<double>::infinity());
    out.push_back(-std::numeric_limits<double>::infinity());
    out.push_back(std::numeric_limits<double>::quiet_NaN());
    Rng rng{20240607};
    while (out.size() < random_count) {
        switch (rng.below(4)) {
            case 0:
            case 1: out.push_back(std::bit_cast<double>(rng.next())); break;
            case 2: {
                // k significant digits times a power of ten around the layout boundaries.
                const int digits = 1 + static_cast<int>(rng.below(17));
                std::uint64_t mantissa = 0;
                for (int i = 0; i < digits; ++i) mantissa = mantissa * 10 + rng.below(10);
                const int exponent = static_cast<int>(rng.below(50)) - 30;
                out.push_back(static_cast<double>(mantissa) * std::pow(10.0, exponent));
                break;
            }
            default: {
                // Subnormals and near-overflow.
                const std::uint64_t bits =
                    rng.chance(50) ? rng.below(1ull << 52) : (0x7fe0000000000000ull | rng.below(1ull << 52));
                out.push_back(std::bit_cast<double>(bits | (rng.chance(50) ? 0x8000000000000000ull : 0)));
            }
        }
    }
    return out;
}

TEST(PyFloatRepr, MatchesPythonRepr) {
    if (!std::filesystem::exists(kPython)) GTEST_SKIP() << kPython << " not found: differential test not run";
    const std::vector<double> values = floatCases(100000);
    std::string input;
    for (double v : values) {
        char buf[20];
        std::snprintf(buf, sizeof buf, "%016llx\n", static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(v)));
        input += buf;
    }
    const auto lines = runPython(R"PY(
import struct, sys
out = []
for line in open(sys.argv[1]):
    out.append(repr(struct.unpack("<d", struct.pack("<Q", int(line, 16)))[0]))
sys.stdout.write("\n".join(out) + "\n")
)PY",
                                 input);
    ASSERT_EQ(lines.size(), values.size());
    int mismatches = 0;
    for (std::size_t i = 0; i < values.size() && mismatches < 10; ++i) {
        const std::string ours = pyFloatRepr(values[i]);
        if (ours != lines[i]) {
            ++mismatches;
            ADD_FAILURE() << "bits " << std::hex << std::bit_cast<std::uint64_t>(values[i]) << ": ours " << ours
                          << ", python " << lines[i];
        }
    }
}

// -------------------------------------------------------------- json.dumps

TEST(PyJsonDumps, Scalars) {
    EXPECT_EQ(dumps(Value::none()), "null");
    EXPECT_EQ(dumps(Value::boolean(true)), "true");
    EXPECT_EQ(dumps(Value::boolean(false)), "false");
    EXPECT_EQ(dumps(Value::integer(-42)), "-42");
    EXPECT_EQ(dumps(Value::integer(std::numeric_limits<std::int64_t>::min())), "-9223372036854775808");
    EXPECT_EQ(dumps(Value::bigInteger("123456789012345678901234567890")), "123456789012345678901234567890");
    EXPECT_EQ(dumps(Value::floating(1.0)), "1.0");
    EXPECT_EQ(dumps(Value::floating(1e-7)), "1e-07");
    EXPECT_EQ(dumps(Value::floating(-0.0)), "-0.0");
    EXPECT_EQ(dumps(Value::floating(std::numeric_limits<double>::quiet_NaN())), "NaN");
    EXPECT_EQ(dumps(Value::floating(std::numeric_limits<double>::infinity())), "Infinity");
    EXPECT_EQ(dumps(Value::floating(-std::numeric_limits<double>::infinity())), "-Infinity");
}

TEST(PyJsonDumps, StringEscapes) {
    const std::string text = "q\"b\\s/n\nr\rt\tb\bf\f\x01\x1f"s + '\0' + "\x7f\xc3\xa9\xe2\x80\xa8\xf0\x9f\x98\x80";
    EXPECT_EQ(dumps(Value::string(text)),
              "\"q\\\"b\\\\s/n\\nr\\rt\\tb\\bf\\f\\u0001\\u001f\\u0000\x7f\xc3\xa9\xe2\x80\xa8\xf0\x9f\x98\x80\"");
    JsonDumpOptions ascii;
    ascii.ensure_ascii = true;
    EXPECT_EQ(dumps(Value::string(text), ascii),
              "\"q\\\"b\\\\s/n\\nr\\rt\\tb\\bf\\f\\u0001\\u001f\\u0000\\u007f\\u00e9\\u2028\\ud83d\\ude00\"");
    EXPECT_EQ(dumps(Value::string("")), "\"\"");
}

TEST(PyJsonDumps, SeparatorsAndIndent) {
    const std::string doc = R"({"a": [1, {"b": []}, {}], "c": "d"})";
    EXPECT_EQ(reencode(doc), doc);
    EXPECT_EQ(reencode(doc, indented("  ")),
              "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    },\n    {}\n  ],\n  \"c\": \"d\"\n}");
    EXPECT_EQ(reencode(doc, indented("\t")),
              "{\n\t\"a\": [\n\t\t1,\n\t\t{\n\t\t\t\"b\": []\n\t\t},\n\t\t{}\n\t],\n\t\"c\": \"d\"\n}");
    // indent=0 still breaks lines (Python: `indent is not None`).
    EXPECT_EQ(reencode(R"({"a":[1,2],"b":{}})", indented("")), "{\n\"a\": [\n1,\n2\n],\n\"b\": {}\n}");
    JsonDumpOptions compact;
    compact.item_separator = ",";
    compact.key_separator = ":";
    EXPECT_EQ(reencode(doc, compact), R"({"a":[1,{"b":[]},{}],"c":"d"})");
    JsonDumpOptions odd = indented("  ");
    odd.item_separator = " ,";
    odd.key_separator = " = ";
    EXPECT_EQ(reencode(R"({"a": [1, 2]})", odd), "{\n  \"a\" = [\n    1 ,\n    2\n  ]\n}");
    EXPECT_EQ(reencode("[]", indented("  ")), "[]");
    EXPECT_EQ(reencode("{}", indented("  ")), "{}");
}

TEST(PyJsonDumps, TuplesAreArrays) {
    Arena arena;
    ListBuilder tuple(arena);
    tuple.push(Value::integer(1));
    tuple.push(Value::string("x"));
    EXPECT_EQ(dumps(tuple.finish(true)), "[1, \"x\"]");
}

TEST(PyJsonDumps, NonStringKeysConvertAsPython) {
    Arena arena;
    DictBuilder dict(arena);
    dict.set(Value::floating(std::numeric_limits<double>::quiet_NaN()), Value::integer(1));
    dict.set(Value::floating(1.5), Value::integer(2));
    dict.set(Value::boolean(true), Value::integer(3));
    dict.set(Value::none(), Value::integer(4));
    dict.set(Value::bigInteger("1000000000000000000000000000000"), Value::integer(5));
    dict.set(Value::integer(-7), Value::integer(6));
    dict.set(Value::floating(-std::numeric_limits<double>::infinity()), Value::integer(7));
    dict.set(Value::floating(1e16), Value::integer(8));
    EXPECT_EQ(dumps(dict.finish()),
              R"({"NaN": 1, "1.5": 2, "true": 3, "null": 4, "1000000000000000000000000000000": 5, "-7": 6, )"
              R"("-Infinity": 7, "1e+16": 8})");
}

TEST(PyJsonDumps, UnserializableValuesAreTypeErrors) {
    Arena arena;
    EXPECT_EQ(dumpError(Value::undefined("x")), "Object of type Undefined is not JSON serializable");
    auto* ns = arena.make<NamespaceData>(NamespaceData{nullptr, nullptr, 0, 0});
    EXPECT_EQ(dumpError(Value::namespace_(ns)), "Object of type Namespace is not JSON serializable");
    EXPECT_EQ(dumpError(Value::callable(nullptr)),
              "Object of type builtin_function_or_method is not JSON serializable");
    JsonDumpOptions macro;
    macro.callable_type_name = [](const Value&) -> std::string_view { return "Macro"; };
    EXPECT_EQ(dumpError(Value::callable(nullptr), macro), "Object of type Macro is not JSON serializable");

    // Deep inside, after output was written: still nothing appended.
    ListBuilder inner(arena);
    inner.push(Value::integer(1));
    inner.push(Value::undefined());
    DictBuilder outer(arena);
    outer.set("a", Value::string("text"));
    outer.set("b", inner.finish());
    EXPECT_EQ(dumpError(outer.finish(), indented("  ")), "Object of type Undefined is not JSON serializable");

    ListBuilder tuple(arena);
    tuple.push(Value::integer(1));
    DictBuilder tuple_key(arena);
    tuple_key.set(tuple.finish(true), Value::integer(1));
    EXPECT_EQ(dumpError(tuple_key.finish()), "keys must be str, int, float, bool or None, not tuple");
}

TEST(PyJsonDumps, IntegersPastPythonsDigitLimitAreValueErrors) {
    const std::string ok = "-" + std::string(4300, '9');
    EXPECT_EQ(dumps(Value::bigInteger(ok)), ok);
    const std::string too_long = "1" + std::string(4300, '0');
    EXPECT_EQ(dumpError(Value::bigInteger(too_long)),
              "Exceeds the limit (4300 digits) for integer string conversion; use sys.set_int_max_str_digits() to "
              "increase the limit");
}

TEST(PyJsonDumps, DeepNestingIsARecursionError) {
    Arena arena;
    Value value = Value::integer(0);
    for (std::size_t i = 0; i < kMaxValueDepth; ++i) {
        ListBuilder list(arena, 1);
        list.push(value);
        value = list.finish();
    }
    EXPECT_EQ(dumps(value).size(), 2 * kMaxValueDepth + 1);
    ListBuilder deeper(arena, 1);
    deeper.push(value);
    EXPECT_EQ(dumpError(deeper.finish()),
              "maximum recursion depth exceeded while encoding a JSON object (a value may nest at most 1024 levels)");
}

Value dictOf(Arena& arena, const std::vector<std::pair<Value, Value>>& entries) {
    DictBuilder dict(arena);
    for (const auto& [k, v] : entries) dict.set(k, v);
    return dict.finish();
}

TEST(PyJsonDumps, SortKeys) {
    Arena arena;
    JsonDumpOptions sorted;
    sorted.sort_keys = true;
    EXPECT_EQ(reencode(R"({"b": 1, "a": [1, {"d": 2, "c": 3}], "\u00e9": 0, "Z": 4})", sorted),
              "{\"Z\": 4, \"a\": [1, {\"c\": 3, \"d\": 2}], \"b\": 1, \"\xc3\xa9\": 0}");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // Python's results (binary insertion sort, NaN compares false).
    EXPECT_EQ(dumps(dictOf(arena, {{Value::integer(3), Value::string("a")},
                                   {Value::floating(nan), Value::string("b")},
                                   {Value::integer(1), Value::string("c")},
                                   {Value::integer(2), Value::string("d")}}),
                    sorted),
              R"({"3": "a", "NaN": "b", "1": "c", "2": "d"})");
    EXPECT_EQ(dumps(dictOf(arena, {{Value::floating(nan), Value::string("b")},
                                   {Value::integer(3), Value::string("a")},
                                   {Value::floating(1.5), Value::string("c")},
                                   {Value::boolean(true), Value::string("d")},
                                   {Value::integer(-2), Value::string("e")}}),
                    sorted),
              R"({"NaN": "b", "-2": "e", "true": "d", "1.5": "c", "3": "a"})");
    EXPECT_EQ(
        dumpError(dictOf(arena, {{Value::integer(1), Value::integer(1)}, {Value::string("b"), Value::integer(2)}}),
                  sorted),
        "'<' not supported between instances of 'str' and 'int'");
    EXPECT_EQ(dumpError(dictOf(arena, {{Value::string("a"), Value::integer(1)},
                                       {Value::integer(1), Value::integer(2)},
                                       {Value::none(), Value::integer(3)}}),
                        sorted),
              "'<' not supported between instances of 'int' and 'str'");
    EXPECT_EQ(dumpError(dictOf(arena, {{Value::floating(2.5), Value::integer(1)}, {Value::none(), Value::integer(2)}}),
                        sorted),
              "'<' not supported between instances of 'NoneType' and 'float'");
    // 64 keys and more: NaN still sorts without error, mixed kinds still fail.
    auto many = [&](bool with_string) {
        DictBuilder dict(arena);
        for (int i = 0; i < 100; ++i) {
            dict.set(i % 10 == 0 ? Value::floating(nan) : Value::integer(100 - i), Value::integer(i));
        }
        if (with_string) dict.set(Value::string("x"), Value::none());
        return dict.finish();
    };
    const std::string many_sorted = dumps(many(false), sorted);
    EXPECT_EQ(std::count(many_sorted.begin(), many_sorted.end(), ':'), 100);
    EXPECT_EQ(dumpError(many(true), sorted), "'<' not supported between instances of 'str' and 'int'");
    // A lone key is never compared.
    EXPECT_EQ(dumps(dictOf(arena, {{Value::none(), Value::integer(1)}}), sorted), R"({"null": 1})");
}

TEST(PyJsonDumps, SortKeysComparesFloatsAndBigIntsExactly) {
    // 1e20 == 10**20 but 1e20 < 10**20 + 1 and 1e20 > 10**20 - 1. Built by
    // hand: the keys are distinct in Python.
    const Value keys[] = {Value::bigInteger("100000000000000000001"),
                          Value::floating(1e20),
                          Value::bigInteger("99999999999999999999"),
                          Value::bigInteger("-100000000000000000000"),
                          Value::floating(-1e300),
                          Value::integer(5),
                          Value::floating(5.5)};
    const Value values[] = {Value::integer(0), Value::integer(1), Value::integer(2), Value::integer(3),
                            Value::integer(4), Value::integer(5), Value::integer(6)};
    const DictData dict{keys, values, 7, nullptr, 0};
    JsonDumpOptions sorted;
    sorted.sort_keys = true;
    EXPECT_EQ(dumps(Value::dict(&dict), sorted),
              R"({"-1e+300": 4, "-100000000000000000000": 3, "5": 5, "5.5": 6, "99999999999999999999": 2, )"
              R"("1e+20": 1, "100000000000000000001": 0})");
}

// -------------------------------------------------------------- json.loads

TEST(PyJsonLoads, Values) {
    EXPECT_EQ(reencode(" \t\n\r[null, true, false, 0, -0, 1.5, -0.0, 1E2, 1e-7, 12345678901234567890] \n"),
              "[null, true, false, 0, 0, 1.5, -0.0, 100.0, 1e-07, 12345678901234567890]");
    EXPECT_EQ(reencode("[NaN, Infinity, -Infinity, 1e400, -1e400, 1e-400, -1e-400, 2.4703282292062328e-324]"),
              "[NaN, Infinity, -Infinity, Infinity, -Infinity, 0.0, -0.0, 5e-324]");
    EXPECT_EQ(reencode("[9223372036854775807, -9223372036854775808, 9223372036854775808, -9223372036854775809]"),
              "[9223372036854775807, -9223372036854775808, 9223372036854775808, -9223372036854775809]");
    EXPECT_EQ(reencode("0.000000000000000000000000000000000000001e350"), "Infinity");
    EXPECT_EQ(reencode("100000000000000000000000000000e-340"), "1e-311");
    EXPECT_EQ(reencode(R"({"a": 1, "b": 2, "a": 3})"), R"({"a": 3, "b": 2})");
    EXPECT_EQ(reencode(R"("\"\\\/\b\f\n\r\t\u00e9\u00E9\ud83d\ude00\u0000")"),
              "\"\\\"\\\\/\\b\\f\\n\\r\\t\xc3\xa9\xc3\xa9\xf0\x9f\x98\x80\\u0000\"");
    // A high surrogate followed by a non-low escape: both read on their own.
    EXPECT_EQ(loadError(R"("\ud83d\u0041")"),
              "Lone surrogate \\ud83d cannot be represented in UTF-8: line 1 column 2 (char 1)");
    EXPECT_EQ(loadError(R"(["x", "\udc00"])"),
              "Lone surrogate \\udc00 cannot be represented in UTF-8: line 1 column 8 (char 7)");
}

TEST(PyJsonLoads, IntegerKinds) {
    Arena arena;
    Value v;
    ASSERT_FALSE(pyJsonLoads("-0", arena, v));
    ASSERT_EQ(v.kind(), ValueKind::integer);
    EXPECT_EQ(v.asInt(), 0);
    ASSERT_FALSE(pyJsonLoads("-123456789012345678901", arena, v));
    ASSERT_EQ(v.kind(), ValueKind::big_integer);
    EXPECT_EQ(v.text(), "-123456789012345678901");
    ASSERT_FALSE(pyJsonLoads("1.0", arena, v));
    EXPECT_EQ(v.kind(), ValueKind::floating);
    ASSERT_FALSE(pyJsonLoads("1e0", arena, v));
    EXPECT_EQ(v.kind(), ValueKind::floating);
}

TEST(PyJsonLoads, StringsWithoutEscapesViewTheText) {
    const std::string text = R"(["plain", "esc\n"])";
    Arena arena;
    Value v;
    ASSERT_FALSE(pyJsonLoads(text, arena, v));
    const std::string_view plain = v.asList().items[0].text();
    EXPECT_EQ(plain, "plain");
    EXPECT_EQ(plain.data(), text.data() + 2);
    EXPECT_EQ(v.asList().items[1].text(), "esc\n");
}

TEST(PyJsonLoads, ErrorsReadAsPythons) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"", "Expecting value: line 1 column 1 (char 0)"},
        {"   ", "Expecting value: line 1 column 4 (char 3)"},
        {"\"\\x\"", "Invalid \\escape: line 1 column 2 (char 1)"},
        {"\"\\u004", "Invalid \\uXXXX escape: line 1 column 3 (char 2)"},
        {"\"\\u0041", "Invalid \\uXXXX escape: line 1 column 3 (char 2)"},
        {"\"\\ud800\\udc00", "Invalid \\uXXXX escape: line 1 column 9 (char 8)"},
        {"\"\\ud800\\uzzzz\"   ", "Invalid \\uXXXX escape: line 1 column 9 (char 8)"},
        {"[1,", "Expecting value: line 1 column 4 (char 3)"},
        {"{", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"},
        {"{\"a\":1,}", "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)"},
        {"[1 2]", "Expecting ',' delimiter: line 1 column 4 (char 3)"},
        {"1.", "Extra data: line 1 column 2 (char 1)"},
        {"1e", "Extra data: line 1 column 2 (char 1)"},
        {"1e+", "Extra data: line 1 column 2 (char 1)"},
        {"01", "Extra data: line 1 column 2 (char 1)"},
        {"-", "Expecting value: line 1 column 1 (char 0)"},
        {"-Inf", "Expecting value: line 1 column 1 (char 0)"},
        {"nul", "Expecting value: line 1 column 1 (char 0)"},
        {"NaNx", "Extra data: line 1 column 4 (char 3)"},
        {"\xef\xbb\xbf"
         "1",
         "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)"},
        {"\"a\x01\"", "Invalid control character at: line 1 column 3 (char 2)"},
        {"\"abc", "Unterminated string starting at: line 1 column 1 (char 0)"},
        {"\"abc\\", "Unterminated string starting at: line 1 column 1 (char 0)"},
        {"\"\xc3\xa9\\q\"", "Invalid \\escape: line 1 column 3 (char 2)"},
        {"\n\n  x", "Expecting value: line 3 column 3 (char 4)"},
        {"[\"\xe2\x82\xac\xf0\x9f\x98\x80\",\n \"\xc3\xa9\" x]", "Expecting ',' delimiter: line 2 column 6 (char 12)"},
        {"[1,]", "Expecting value: line 1 column 4 (char 3)"},
        {"{\"a\" 1}", "Expecting ':' delimiter: line 1 column 6 (char 5)"},
        {"{\"a\":}", "Expecting value: line 1 column 6 (char 5)"},
        {"{1:2}", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"},
        {"[] []", "Extra data: line 1 column 4 (char 3)"},
        {"'a'", "Expecting value: line 1 column 1 (char 0)"},
        {std::string(4301, '1'),
         "Exceeds the limit (4300 digits) for integer string conversion: value has 4301 digits; use "
         "sys.set_int_max_str_digits() to increase the limit"},
    };
    for (const auto& [doc, expected] : cases) EXPECT_EQ(loadError(doc), expected) << doc;
    EXPECT_EQ(loadError("-" + std::string(4300, '1')), "(no error)");
}

TEST(PyJsonLoads, NestingPast512IsTooDeep) {
    Arena arena;
    Value v;
    EXPECT_FALSE(pyJsonLoads(std::string(512, '[') + std::string(512, ']'), arena, v));
    auto error = pyJsonLoads(std::string(513, '[') + std::string(513, ']'), arena, v);
    ASSERT_TRUE(error);
    EXPECT_TRUE(error->too_deep);
    EXPECT_EQ(error->message, "maximum recursion depth exceeded while decoding a JSON array from a unicode string");
    std::string objects;
    for (int i = 0; i < 513; ++i) objects += "{\"a\":";
    error = pyJsonLoads(objects, arena, v);
    ASSERT_TRUE(error);
    EXPECT_TRUE(error->too_deep);
    // Any other error is an ordinary one.
    error = pyJsonLoads("[", arena, v);
    ASSERT_TRUE(error);
    EXPECT_FALSE(error->too_deep);
}

TEST(PyJsonNumber, AsJsonLoadsMakesThem) {
    Arena arena;
    EXPECT_EQ(pyJsonNumber("-0", arena).kind(), ValueKind::integer);
    EXPECT_EQ(pyJsonNumber("42", arena).asInt(), 42);
    const Value big = pyJsonNumber("-92233720368547758080", arena);
    ASSERT_EQ(big.kind(), ValueKind::big_integer);
    EXPECT_EQ(big.text(), "-92233720368547758080");
    EXPECT_EQ(pyJsonNumber(std::string(5000, '7'), arena).text().size(), 5000u);  // no digit limit here
    EXPECT_EQ(pyJsonNumber("1.0", arena).asFloat(), 1.0);
    EXPECT_EQ(pyJsonNumber("1E400", arena).asFloat(), std::numeric_limits<double>::infinity());
    EXPECT_TRUE(std::signbit(pyJsonNumber("-1e-400", arena).asFloat()));
    EXPECT_EQ(pyJsonNumber("-1e-400", arena).asFloat(), 0.0);
    EXPECT_EQ(pyJsonNumber("0.1e1", arena).asFloat(), 1.0);
}

// ----------------------------------------------------- differential: JSON

class DocGenerator {
public:
    explicit DocGenerator(std::uint64_t seed) : rng_{seed} {}

    std::string document() {
        std::string out;
        ws(out);
        value(out, 0);
        ws(out);
        return out;
    }

    // A valid document broken (or not) by one edit at a character boundary.
    std::string mutate(std::string doc) {
        static const std::vector<std::string> inserts = {"\"",
                                                         "\\",
                                                         ",",
                                                         ":",
                                                         "[",
                                                         "]",
                                                         "{",
                                                         "}",
                                                         std::string(1, '\0'),
                                                         "\x01",
                                                         "\x1f",
                                                         "\n",
                                                         " ",
                                                         "e",
                                                         "E",
                                                         ".",
                                                         "-",
                                                         "+",
                                                         "0",
                                                         "u",
                                                         "x",
                                                         "N",
                                                         "I",
                                                         "/",
                                                         "\\u",
                                                         "\\ud800",
                                                         "\\udc00",
                                                         "\\uD83D\\uDE00",
                                                         "\xc3\xa9",
                                                         "\xef\xbb\xbf",
                                                         "NaN",
                                                         "-Infinity",
                                                         "true",
                                                         "nul",
                                                         "\\u12",
                                                         "1e",
                                                         "0.",
                                                         "\t"};
        const std::size_t at = boundary(doc, rng_.below(doc.size() + 1));
        switch (rng_.below(4)) {
            case 0: doc.resize(at); break;
            case 1: {
                std::size_t end = at;
                if (end < doc.size()) end = boundary(doc, end + 1 + rng_.below(3));
                doc.erase(at, end - at);
                break;
            }
            default: doc.insert(at, rng_.pick(inserts));
        }
        return doc;
    }

private:
    // The first character boundary at or after `pos`.
    static std::size_t boundary(const std::string& s, std::size_t pos) {
        while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xc0) == 0x80) ++pos;
        return std::min(pos, s.size());
    }

    void ws(std::string& out) {
        static const std::vector<std::string> spaces = {"", "", "", " ", "\n", "\t", "\r\n", "  ", " \n\t "};
        out += rng_.pick(spaces);
    }

    void value(std::string& out, int depth) {
        const std::uint64_t r = rng_.below(depth >= 6 ? 70 : 100);
        if (r < 20) {
            string(out);
        } else if (r < 35) {
            integer(out);
        } else if (r < 55) {
            floating(out);
        } else if (r < 70) {
            static const std::vector<std::string> constants = {"true", "false", "null", "NaN", "Infinity", "-Infinity"};
            out += rng_.pick(constants);
        } else if (r < 85) {
            out += '[';
            ws(out);
            const std::uint64_t n = rng_.below(6);
            for (std::uint64_t i = 0; i < n; ++i) {
                if (i != 0) {
                    out += ',';
                    ws(out);
                }
                value(out, depth + 1);
                ws(out);
            }
            out += ']';
        } else {
            out += '{';
            ws(out);
            const std::uint64_t n = rng_.below(7);
            for (std::uint64_t i = 0; i < n; ++i) {
                if (i != 0) {
                    out += ',';
                    ws(out);
                }
                // A small pool makes repeated keys common.
                static const std::vector<std::string> pool = {"\"a\"",       "\"b\"",        "\"role\"", "\"\"",
                                                              "\"\\u0061\"", "\"\xc3\xa9\"", "\"B\""};
                if (rng_.chance(50)) {
                    out += rng_.pick(pool);
                } else {
                    string(out);
                }
                ws(out);
                out += ':';
                ws(out);
                value(out, depth + 1);
                ws(out);
            }
            out += '}';
        }
    }

    void hex4(std::uint32_t unit, std::string& out) {
        const char* digits = rng_.chance(50) ? "0123456789abcdef" : "0123456789ABCDEF";
        out += "\\u";
        for (int shift = 12; shift >= 0; shift -= 4) out += digits[(unit >> shift) & 0xf];
    }

    std::uint32_t scalar() {
        switch (rng_.below(5)) {
            case 0: return 0x80 + static_cast<std::uint32_t>(rng_.below(0x800 - 0x80));
            case 1: {
                std::uint32_t cp = 0;
                do cp = 0x800 + static_cast<std::uint32_t>(rng_.below(0x10000 - 0x800));
                while (cp >= 0xd800 && cp <= 0xdfff);
                return cp;
            }
            case 2: return 0x10000 + static_cast<std::uint32_t>(rng_.below(0x110000 - 0x10000));
            case 3: {
                static const std::vector<std::uint32_t> special = {0x7f,   0x85,   0xa0,   0x2028,   0x2029,
                                                                   0xfeff, 0xfffd, 0xffff, 0x10ffff, 0x1f600};
                return rng_.pick(special);
            }
            default: return 0x20 + static_cast<std::uint32_t>(rng_.below(0x5f));
        }
    }

    void string(std::string& out) {
        out += '"';
        const std::uint64_t n = rng_.below(12);
        for (std::uint64_t i = 0; i < n; ++i) {
            const std::uint64_t r = rng_.below(100);
            if (r < 40) {
                char c = static_cast<char>(0x20 + rng_.below(0x5f));
                if (c == '"' || c == '\\') c = 'q';
                out += c;
            } else if (r < 55) {
                static const std::vector<std::string> escapes = {"\\\"", "\\\\", "\\/", "\\b",
                                                                 "\\f",  "\\n",  "\\r", "\\t"};
                out += rng_.pick(escapes);
            } else if (r < 65) {
                hex4(static_cast<std::uint32_t>(rng_.below(0x20)), out);  // control characters
            } else if (r < 75) {
                const std::uint32_t cp = scalar();
                if (cp >= 0x10000) {
                    hex4(0xd800 + ((cp - 0x10000) >> 10), out);
                    hex4(0xdc00 + ((cp - 0x10000) & 0x3ff), out);
                } else {
                    hex4(cp, out);
                }
            } else {
                appendUtf8(scalar(), out);
            }
        }
        out += '"';
    }

    void digits(std::string& out, std::uint64_t count, bool leading_nonzero) {
        for (std::uint64_t i = 0; i < count; ++i) {
            out += static_cast<char>('0' + ((i == 0 && leading_nonzero) ? 1 + rng_.below(9) : rng_.below(10)));
        }
    }

    void integer(std::string& out) {
        static const std::vector<std::string> edges = {"0",
                                                       "-0",
                                                       "9223372036854775807",
                                                       "-9223372036854775808",
                                                       "9223372036854775808",
                                                       "-9223372036854775809",
                                                       "18446744073709551616"};
        if (rng_.chance(20)) {
            out += rng_.pick(edges);
            return;
        }
        if (rng_.chance(30)) out += '-';
        const std::uint64_t count = rng_.chance(70) ? 1 + rng_.below(6) : 15 + rng_.below(50);
        digits(out, count, true);
    }

    void floating(std::string& out) {
        static const std::vector<std::string> edges = {"4.9e-324",
                                                       "5e-324",
                                                       "2.4703282292062328e-324",
                                                       "2.4703282292062327e-324",
                                                       "1e-320",
                                                       "-0.0",
                                                       "0.0",
                                                       "0e0",
                                                       "-0E-0",
                                                       "2.2250738585072014e-308",
                                                       "2.225073858507201e-308",
                                                       "1e309",
                                                       "-1e400",
                                                       "1.7976931348623157e308",
                                                       "1.7976931348623158e308",
                                                       "1.7976931348623159e308",
                                                       "1e16",
                                                       "1e-5",
                                                       "0.0001",
                                                       "9999999999999999",
                                                       "1e-400",
                                                       "0.1e-9999999999999999999"};
        const std::uint64_t r = rng_.below(100);
        if (r < 15) {
            out += rng_.pick(edges);
        } else if (r < 45) {
            // The repr of a random finite double (Python's own output form).
            double d = 0;
            do d = std::bit_cast<double>(rng_.next());
            while (!std::isfinite(d));
            out += pyFloatRepr(d);
        } else {
            if (rng_.chance(30)) out += '-';
            if (rng_.chance(30)) {
                out += '0';
            } else {
                digits(out, 1 + rng_.below(rng_.chance(80) ? 8 : 25), true);
            }
            const bool fraction = rng_.chance(60);
            if (fraction) {
                out += '.';
                digits(out, 1 + rng_.below(rng_.chance(80) ? 8 : 25), false);
            }
            if (!fraction || rng_.chance(50)) {
                out += rng_.chance(50) ? 'e' : 'E';
                static const std::vector<std::string> signs = {"", "+", "-"};
                out += rng_.pick(signs);
                if (rng_.chance(10)) out += "00";
                out += std::to_string(rng_.below(rng_.chance(80) ? 30 : 420));
            }
        }
    }

    Rng rng_;
};

const char* const kJsonScript = R"PY(
import json, sys
configs = [
    dict(ensure_ascii=False),
    dict(ensure_ascii=False, indent=2),
    dict(ensure_ascii=False, indent=4),
    dict(ensure_ascii=False, indent="\t"),
    dict(ensure_ascii=True),
    dict(ensure_ascii=False, sort_keys=True),
    dict(ensure_ascii=False, separators=(",", ":")),
]
out = []
for line in open(sys.argv[1]):
    doc = bytes.fromhex(line.strip()).decode("utf-8")
    try:
        value = json.loads(doc)
    except RecursionError:
        out.append("D")
        continue
    except ValueError as e:
        out.append("E " + str(e).encode("utf-8").hex())
        continue
    try:
        out.append("V " + " ".join(json.dumps(value, **c).encode("utf-8").hex() for c in configs))
    except UnicodeEncodeError:
        out.append("S")  # a lone surrogate: no UTF-8 for it
sys.stdout.write("\n".join(out) + "\n")
)PY";

std::vector<JsonDumpOptions> differentialConfigs() {
    std::vector<JsonDumpOptions> configs(7);
    configs[1].indent = "  ";
    configs[2].indent = "    ";
    configs[3].indent = "\t";
    configs[4].ensure_ascii = true;
    configs[5].sort_keys = true;
    configs[6].item_separator = ",";
    configs[6].key_separator = ":";
    return configs;
}

TEST(PyJsonDifferential, LoadsThenDumpsMatchesPython) {
    if (!std::filesystem::exists(kPython)) GTEST_SKIP() << kPython << " not found: differential test not run";
    DocGenerator generator(0x5eed);
    std::vector<std::string> docs;
    for (int i = 0; i < 3000; ++i) docs.push_back(generator.document());
    for (int i = 0; i < 600; ++i) docs.push_back(generator.mutate(docs[static_cast<std::size_t>(i) * 5 % 3000]));
    for (const char* doc : {"",
                            " ",
                            "[",
                            "]",
                            "{\"a\"}",
                            "[1,]",
                            "\"\\ud800\"",
                            "\"\\ud800\\ud800\\udc00\"",
                            "\"\\udc00\\ud800\"",
                            "[\"\\ud800\", x]",
                            "\"\\u00\"",
                            "1 2",
                            "\"\t\"",
                            "[-]",
                            "[.5]",
                            "[1.e5]",
                            "[+1]",
                            "[0x10]",
                            "[Infinity1]",
                            "[-NaN]",
                            "[nan]",
                            "{\"a\":1 \"b\":2}"}) {
        docs.emplace_back(doc);
    }
    // Ties and long mantissas: correct rounding needs every digit.
    docs.push_back("[9007199254740993.0, 9007199254740993." + std::string(800, '0') + "1, 9007199254740993" +
                   std::string(800, '0') + "1e-801]");
    docs.push_back(std::string(4300, '9'));
    docs.push_back("-" + std::string(4301, '9'));
    docs.push_back("[" + std::string(4301, '1') + ", \"\x01\"]");
    std::string input;
    for (const auto& doc : docs) input += toHex(doc) + "\n";
    const auto lines = runPython(kJsonScript, input);
    ASSERT_EQ(lines.size(), docs.size());

    const auto configs = differentialConfigs();
    int failures = 0;
    int rejected = 0;
    int accepted = 0;
    for (std::size_t i = 0; i < docs.size() && failures < 10; ++i) {
        const std::string& doc = docs[i];
        const std::string& python = lines[i];
        Arena arena;
        Value value;
        const auto error = pyJsonLoads(doc, arena, value);
        std::string ours;
        if (error) {
            ++rejected;
            if (error->message.rfind("Lone surrogate", 0) == 0) {
                ours = "S";
            } else {
                ours = "E " + toHex(error->message);
            }
        } else {
            ++accepted;
            ours = "V";
            for (const auto& config : configs) {
                std::string out;
                if (auto dump_error = pyJsonDumps(value, config, out)) out = "dump error: " + *dump_error;
                ours += " " + toHex(out);
            }
        }
        if (ours != python) {
            ++failures;
            ADD_FAILURE() << "document " << i << " (hex " << toHex(doc) << "):\n ours   " << ours.substr(0, 2)
                          << fromHex(ours.substr(ours.size() > 2 ? 2 : ours.size())) << "\n python "
                          << python.substr(0, 2) << fromHex(python.substr(python.size() > 2 ? 2 : python.size()));
        }
    }
    EXPECT_GE(accepted, 3000);
    EXPECT_GE(rejected, 300) << "the invalid documents should mostly be invalid";
}

// A dict's keys of every Python kind, sorted with sort_keys: the order (NaN
// included) or the TypeError must be Python's.
TEST(PyJsonDifferential, SortKeysMatchesPython) {
    if (!std::filesystem::exists(kPython)) GTEST_SKIP() << kPython << " not found: differential test not run";
    Rng rng{77};
    Arena arena;
    std::vector<Value> dicts;
    std::string input;
    for (int d = 0; d < 400; ++d) {
        const int mode = d % 4;  // 0: numbers with NaN, 1: numbers, 2: mixed kinds, 3: strings with one odd key
        const std::uint64_t n = rng.below(64);
        DictBuilder dict(arena);
        std::string literal = "{";
        for (std::uint64_t i = 0; i < n; ++i) {
            Value key;
            std::string text;
            std::uint64_t kind = rng.below(100);
            if (mode == 3)
                kind = (i == n / 2 && rng.chance(70)) ? rng.pick(std::vector<std::uint64_t>{10, 40, 92, 97}) : 70;
            if (mode == 0 && kind < 8) {
                key = Value::floating(std::numeric_limits<double>::quiet_NaN());
                text = "float('nan')";
            } else if (kind < 30 || (mode < 2 && kind >= 60)) {
                const auto i64 = static_cast<std::int64_t>(rng.below(41)) - 20;
                key = Value::integer(i64);
                text = std::to_string(i64);
            } else if (kind < 50) {
                const double f = static_cast<double>(static_cast<std::int64_t>(rng.below(81)) - 40) / 4;
                key = Value::floating(f);
                text = pyFloatRepr(f);
            } else if (kind < 55) {
                key = Value::boolean(rng.chance(50));
                text = key.asBool() ? "True" : "False";
            } else if (kind < 60) {
                key = Value::bigInteger(rng.chance(50) ? "100000000000000000000" : "-100000000000000000000");
                text = std::string(key.text());
            } else if (kind < 90) {
                static const std::vector<std::string> strings = {"a", "b", "c", "ab", "B", "", "\xc3\xa9"};
                const std::string& s = rng.pick(strings);
                key = Value::string(s);
                text = "'" + s + "'";
            } else if (kind < 95) {
                key = Value::none();
                text = "None";
            } else {
                key = Value::floating(rng.chance(50) ? std::numeric_limits<double>::infinity() : -1e300);
                text = key.asFloat() > 0 ? "float('inf')" : "-1e300";
            }
            dict.set(key, Value::integer(static_cast<std::int64_t>(i)));
            literal += text + ": " + std::to_string(i) + ", ";
        }
        literal += "}";
        dicts.push_back(dict.finish());
        input += toHex(literal) + "\n";
    }
    const auto lines = runPython(R"PY(
import json, sys
out = []
for line in open(sys.argv[1]):
    value = eval(bytes.fromhex(line.strip()).decode("utf-8"))
    try:
        out.append("V " + json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8").hex())
    except TypeError as e:
        out.append("E " + str(e).encode("utf-8").hex())
sys.stdout.write("\n".join(out) + "\n")
)PY",
                                 input);
    ASSERT_EQ(lines.size(), dicts.size());
    JsonDumpOptions sorted;
    sorted.sort_keys = true;
    int failures = 0;
    for (std::size_t i = 0; i < dicts.size() && failures < 10; ++i) {
        std::string out;
        const auto error = pyJsonDumps(dicts[i], sorted, out);
        const std::string ours = error ? "E " + toHex(*error) : "V " + toHex(out);
        if (ours != lines[i]) {
            ++failures;
            ADD_FAILURE() << "dict " << i << ": ours " << fromHex(ours.substr(2)) << "\n python "
                          << fromHex(lines[i].substr(2));
        }
    }
}

}  // namespace
