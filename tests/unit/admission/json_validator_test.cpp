// JsonValidator: RFC 8259 in full, a depth bound with the path where it was
// crossed, and the same answer with the SSE2 string scan and its plain twin.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "admission/json_string_stop.hpp"
#include "admission/json_validator.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace dpgate::admission {
namespace {

using Kind = JsonFault::Kind;

// Both string scans must agree on every input; the first one's fault is returned.
std::optional<JsonFault> validate(const std::string& text, std::uint32_t max_depth = 256) {
    JsonValidator validator;
    JsonValidation options;
    options.max_depth = max_depth;
    options.simd = true;
    std::optional<JsonFault> simd = validator.validate(text, options);
    options.simd = false;
    const std::optional<JsonFault> plain = validator.validate(text, options);
    EXPECT_EQ(simd.has_value(), plain.has_value()) << text.substr(0, 200);
    if (simd && plain) {
        EXPECT_EQ(simd->kind, plain->kind);
        EXPECT_EQ(simd->offset, plain->offset);
        EXPECT_EQ(simd->path, plain->path);
    }
    return simd;
}

std::string nestedArrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string nestedObjects(std::size_t depth, const std::string& key = "a") {
    std::string out;
    for (std::size_t i = 0; i < depth; ++i) out += "{\"" + key + "\":";
    out += "1";
    out += std::string(depth, '}');
    return out;
}

TEST(JsonValidator, AcceptsValidJson) {
    const std::vector<std::string> valid = {
        "{}",
        "[]",
        " \t\r\n{ \"a\" : [ 1 , 2.5 , -0 , 0.0e0 , 1E+10 , -1e-10 , true , false , null ] } \n",
        "0",
        "-0.5",
        "\"\"",
        "\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\\u0041\\u00e9\\uD83D\\uDE00\"",
        "\"caf\xc3\xa9 \xe5\x87\xbd\xe6\x95\xb0 \xf0\x9f\x98\x80\"",
        "{\"a\":{\"b\":{\"c\":[[],[{}],{\"\":\"\"}]}}}",
        "{\"a\":1,\"a\":2}",  // duplicate keys are JSON (the readers decide)
        "123456789012345678901234567890.5e-3",
        "[\"" + std::string(1000, 'x') + "\"]",
        "true",
        "null",
    };
    for (const std::string& text : valid) {
        EXPECT_FALSE(validate(text).has_value()) << text;
        EXPECT_TRUE(nlohmann::json::accept(text)) << "the reference disagrees: " << text;
    }
}

struct Invalid {
    const char* name;
    std::string text;
    Kind kind;
    std::size_t offset;
    const char* what_part;
    std::string path;
};

TEST(JsonValidator, RefusesEachInvalidShapeWithWhereAndWhat) {
    const std::vector<Invalid> cases = {
        {"nan", R"({"m":NaN})", Kind::syntax, 5, "NaN and Infinity", "m"},
        {"infinity", R"({"m":Infinity})", Kind::syntax, 5, "NaN and Infinity", "m"},
        {"minus_infinity", R"({"m":-Infinity})", Kind::syntax, 5, "invalid number", "m"},
        {"double_comma", R"({"m":[1,,2]})", Kind::syntax, 8, "expected a value", "m[1]"},
        {"missing_colon", R"({"m":{"a" 1}})", Kind::syntax, 10, "expected ':'", "m.a"},
        {"tru", R"({"m":tru})", Kind::syntax, 5, "invalid literal", "m"},
        {"truex", R"({"m":truex})", Kind::syntax, 5, "invalid literal", "m"},
        {"nul", R"({"m":nul})", Kind::syntax, 5, "invalid literal", "m"},
        {"True", R"({"m":True})", Kind::syntax, 5, "expected a value", "m"},
        {"two_dots", R"({"m":1.2.3})", Kind::syntax, 5, "invalid number", "m"},
        {"leading_zero", R"({"m":01})", Kind::syntax, 5, "invalid number", "m"},
        {"leading_plus", R"({"m":+1})", Kind::syntax, 5, "expected a value", "m"},
        {"bare_fraction", R"({"m":.5})", Kind::syntax, 5, "expected a value", "m"},
        {"dot_no_digits", R"({"m":1.})", Kind::syntax, 5, "invalid number", "m"},
        {"exponent_no_digits", R"({"m":1e})", Kind::syntax, 5, "invalid number", "m"},
        {"hex", R"({"m":0x10})", Kind::syntax, 5, "invalid number", "m"},
        {"minus_alone", R"({"m":-})", Kind::syntax, 5, "invalid number", "m"},
        {"array_trailing_comma", R"({"m":[1,2,]})", Kind::syntax, 10, "expected a value", "m[2]"},
        {"object_trailing_comma", R"({"m":{"a":1,}})", Kind::syntax, 12, "expected an object key", "m"},
        {"unquoted_key", R"({"m":{a:1}})", Kind::syntax, 6, "expected an object key", "m"},
        {"single_quotes", R"({"m":'x'})", Kind::syntax, 5, "expected a value", "m"},
        {"number_key", R"({1:2})", Kind::syntax, 1, "expected an object key", ""},
        {"missing_comma_array", R"({"m":[1 2]})", Kind::syntax, 8, "expected ',' or ']'", "m[0]"},
        {"missing_comma_object", R"({"m":1 "n":2})", Kind::syntax, 7, "expected ',' or '}'", "m"},
        {"bad_escape", R"({"m":"a\qb"})", Kind::syntax, 7, "bad escape", "m"},
        {"short_unicode_escape", R"({"m":"\u12"})", Kind::syntax, 6, "four hex digits", "m"},
        {"lone_high_surrogate", R"({"m":"\ud800x"})", Kind::syntax, 6, "lone surrogate", "m"},
        {"high_then_high", R"({"m":"\ud800\ud800"})", Kind::syntax, 6, "lone surrogate", "m"},
        {"lone_low_surrogate", R"({"m":"\udc00"})", Kind::syntax, 6, "lone surrogate", "m"},
        {"control_character", "{\"m\":\"a\x01\"}", Kind::syntax, 7, "unescaped control character", "m"},
        {"raw_newline", "{\"m\":\"a\nb\"}", Kind::syntax, 7, "unescaped control character", "m"},
        {"raw_tab", "{\"m\":\"\t\"}", Kind::syntax, 6, "unescaped control character", "m"},
        {"unclosed_string", R"({"m":"abc)", Kind::syntax, 5, "unclosed string", "m"},
        {"unclosed_after_escape", R"({"m":"abc\)", Kind::syntax, 5, "unclosed string", "m"},
        {"unclosed_object", R"({"m":1)", Kind::syntax, 6, "not closed", "m"},
        {"unclosed_array", R"({"m":[1)", Kind::syntax, 7, "not closed", "m[0]"},
        {"truncated_after_colon", R"({"m":)", Kind::syntax, 5, "expected a value", "m"},
        {"mismatched_close", R"({"m":[1}})", Kind::syntax, 7, "expected ',' or ']'", "m[0]"},
        {"second_value", R"({"m":1}{"m":1})", Kind::syntax, 7, "trailing content", ""},
        {"trailing_garbage", R"({"m":1}xyz)", Kind::syntax, 7, "trailing content", ""},
        {"two_scalars", "1 2", Kind::syntax, 2, "trailing content", ""},
        {"invalid_utf8_in_string", "{\"m\":\"a\xff\"}", Kind::invalid_utf8, 7, "", ""},
        {"overlong_utf8", "{\"m\":\"\xc0\xaf\"}", Kind::invalid_utf8, 6, "", ""},
        {"encoded_surrogate", "{\"m\":\"\xed\xa0\x80\"}", Kind::invalid_utf8, 6, "", ""},
        {"truncated_utf8", "{\"m\":\"\xe5\x87\"}", Kind::invalid_utf8, 6, "", ""},
        {"non_ascii_outside_string", "{\"m\":\xc3\xa9}", Kind::syntax, 5, "expected a value", "m"},
        {"byte_order_mark", "\xef\xbb\xbf{}", Kind::syntax, 0, "expected a value", ""},
        {"nul_byte", std::string("{\"m\":1}\0", 8), Kind::syntax, 7, "trailing content", ""},
        {"empty", "", Kind::empty, 0, "", ""},
        {"whitespace", " \n\t\r ", Kind::empty, 5, "", ""},
        {"comment", "{\"m\":1 /* x */}", Kind::syntax, 7, "expected ',' or '}'", "m"},
    };
    for (const Invalid& c : cases) {
        const std::optional<JsonFault> fault = validate(c.text);
        ASSERT_TRUE(fault.has_value()) << c.name;
        EXPECT_EQ(fault->kind, c.kind) << c.name;
        EXPECT_EQ(fault->offset, c.offset) << c.name << ": " << fault->what;
        EXPECT_NE(std::string(fault->what).find(c.what_part), std::string::npos) << c.name << ": " << fault->what;
        EXPECT_EQ(fault->path, c.path) << c.name;
        // nlohmann::json skips a leading byte order mark and ends its input at a NUL byte;
        // every other shape it refuses too.
        if (std::string(c.name) != "byte_order_mark" && std::string(c.name) != "nul_byte") {
            EXPECT_FALSE(nlohmann::json::accept(c.text)) << "the reference disagrees: " << c.name;
        }
    }
}

TEST(JsonValidator, DepthAtTheLimitPassesOneDeeperIsRefusedWhereItOpens) {
    for (std::uint32_t limit : {2u, 16u, 256u, 1000u}) {
        EXPECT_FALSE(validate(nestedArrays(limit), limit).has_value()) << limit;
        EXPECT_FALSE(validate(nestedObjects(limit), limit).has_value()) << limit;
        const std::optional<JsonFault> arrays = validate(nestedArrays(limit + 1), limit);
        ASSERT_TRUE(arrays.has_value());
        EXPECT_EQ(arrays->kind, Kind::too_deep);
        EXPECT_EQ(arrays->offset, limit);  // the '[' that opens level limit + 1
        std::string path;
        for (std::uint32_t i = 0; i < limit; ++i) path += "[0]";
        EXPECT_EQ(arrays->path, clipJsonPath(path));
        const std::optional<JsonFault> objects = validate(nestedObjects(limit + 1), limit);
        ASSERT_TRUE(objects.has_value());
        EXPECT_EQ(objects->kind, Kind::too_deep);
        EXPECT_EQ(objects->offset, 5u * limit);
        path = "a";
        for (std::uint32_t i = 1; i < limit; ++i) path += ".a";
        EXPECT_EQ(objects->path, clipJsonPath(path));
    }
}

TEST(JsonValidator, DepthCountsTheWholeDocumentNotOneBranch) {
    // Shallow siblings do not add up; the deepest branch counts.
    const std::string text = R"({"a":[[1]],"b":{"c":[2]},"d":[[[3]]]})";
    EXPECT_FALSE(validate(text, 4).has_value());
    const std::optional<JsonFault> fault = validate(text, 3);
    ASSERT_TRUE(fault.has_value());
    EXPECT_EQ(fault->kind, Kind::too_deep);
    EXPECT_EQ(fault->path, "d[0][0]");
}

TEST(JsonValidator, AMillionLevelsEndAtTheLimitWithoutRecursion) {
    // Unterminated too: the fault comes at the limit, not at the end.
    for (const std::string& text : {std::string(1'000'000, '['), nestedArrays(1'000'000), nestedObjects(400'000)}) {
        const std::optional<JsonFault> fault = validate(text, 1000);
        ASSERT_TRUE(fault.has_value());
        EXPECT_EQ(fault->kind, Kind::too_deep);
        EXPECT_LE(fault->path.size(), kMaxJsonPathBytes);
    }
}

TEST(JsonValidator, WideValuesPass) {
    std::string array = "[0";
    for (int i = 1; i < 1'000'000; ++i) array += ",0";
    array += "]";
    EXPECT_FALSE(validate(array).has_value());
    std::string object = "{";
    for (int i = 0; i < 100'000; ++i) object += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":[]";
    object += "}";
    EXPECT_FALSE(validate(object).has_value());
    // The millionth element is where the fault is.
    array.back() = ',';
    array += "]";
    const std::optional<JsonFault> fault = validate(array);
    ASSERT_TRUE(fault.has_value());
    EXPECT_EQ(fault->path, "[1000000]");
}

TEST(JsonValidator, PathsAreClippedKeysUnescapedAndCutOnCharacters) {
    // A megabyte key is named by its first kMaxJsonPathKeyBytes bytes.
    const std::string huge_key(1 << 20, 'k');
    std::optional<JsonFault> fault = validate("{\"" + huge_key + "\":[1,,2]}");
    ASSERT_TRUE(fault.has_value());
    EXPECT_EQ(fault->path, std::string(kMaxJsonPathKeyBytes, 'k') + "[1]");
    // A deep path of long keys: at most kMaxJsonPathBytes, "..." at the cut.
    fault = validate(nestedObjects(300, std::string(100, 'x')), 256);
    ASSERT_TRUE(fault.has_value());
    EXPECT_EQ(fault->kind, Kind::too_deep);
    EXPECT_EQ(fault->path.size(), kMaxJsonPathBytes);
    EXPECT_EQ(fault->path.substr(fault->path.size() - 3), "...");
    // Two-byte characters: the cut never splits one.
    fault = validate(nestedObjects(300, "\xc3\xa9\xc3\xa9\xc3\xa9"), 256);
    ASSERT_TRUE(fault.has_value());
    EXPECT_LE(fault->path.size(), kMaxJsonPathBytes);
    EXPECT_EQ(findInvalidUtf8(fault->path), kValidUtf8);
    // Escapes in a key are shown as the characters they stand for.
    fault = validate(R"({"a\"b\u00e9\ud83d\ude00\n":[1,,2]})");
    ASSERT_TRUE(fault.has_value());
    EXPECT_EQ(fault->path, "a\"b\xc3\xa9\xf0\x9f\x98\x80\n[1]");
}

TEST(JsonValidator, Utf8CheckCanBeLeftToTheCaller) {
    JsonValidator validator;
    JsonValidation options;
    options.check_utf8 = false;
    // Inside a string an unchecked byte passes; outside one it is still a syntax fault.
    EXPECT_FALSE(validator.validate("[\"\xff\"]", options).has_value());
    const auto fault = validator.validate("[\xff]", options);
    ASSERT_TRUE(fault.has_value());
    EXPECT_EQ(fault->kind, Kind::syntax);
}

TEST(JsonStringStop, TheSse2ScanAgreesWithThePlainOneAtEveryAlignment) {
    std::mt19937 rng(44);
    const char alphabet[] = {'a',    'Z',    '0', '+',  '/',    '=',    ' ',   '\xc3',
                             '\xa9', '\x7f', '"', '\\', '\x1f', '\x00', '\x20'};
    for (int round = 0; round < 2000; ++round) {
        const std::size_t size = rng() % 300;
        std::string text(size + 64, 'A');
        for (std::size_t i = 0; i < text.size(); ++i) {
            // Mostly plain, with an occasional stop byte.
            text[i] = rng() % 40 == 0 ? alphabet[10 + rng() % 5] : alphabet[rng() % 10];
        }
        for (std::size_t offset = 0; offset < 64 && offset <= size; offset += 1 + rng() % 7) {
            const char* begin = text.data() + offset;
            const char* end = text.data() + size;
            ASSERT_EQ(jsonStringStop(begin, end), jsonStringStopPlain(begin, end)) << round << " " << offset;
        }
    }
    // Every stop byte at every position of a 64-byte block.
    for (const char stop : {'"', '\\', '\x00', '\x1f'}) {
        for (std::size_t at = 0; at < 130; ++at) {
            std::string text(130, 'x');
            text[at] = stop;
            EXPECT_EQ(jsonStringStop(text.data(), text.data() + text.size()) - text.data(), static_cast<long>(at));
        }
    }
    const std::string high(100, '\x80');  // bytes >= 0x80 are plain (signed compares would see them as controls)
    EXPECT_EQ(jsonStringStop(high.data(), high.data() + high.size()), high.data() + high.size());
}

}  // namespace
}  // namespace dpgate::admission
