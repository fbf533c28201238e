// Hostile JSON through admit(): nesting past limits.max_json_depth in every
// field (read by dpgate or not) is a 400 naming the path where the limit was
// crossed, invalid JSON anywhere is a 400 naming where, no error quotes
// unbounded request text, and `n` is held to limits.max_n.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "admission/admit.hpp"
#include "admission/clip_json_path.hpp"
#include "admission/tokenizer/utf8.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

const std::string kModel = R"("model":"ds-v4.1-flash-1017")";
const std::string kUser = R"({"role":"user","content":"hi"})";

std::string chatWith(const std::string& fields) {
    return "{" + kModel + R"(,"messages":[)" + kUser + "]," + fields + "}";
}

// A field whose value (`@` in `body`) is an array or object at `level` (the body is level 1).
struct Field {
    const char* name;
    std::function<std::string(const std::string& value)> body;
    std::uint32_t level;
    std::string path;  // of the value
    Endpoint endpoint = Endpoint::chat_completions;
    bool admitted_at_limit = true;  // false: refused as the wrong type, not for its depth
};

std::vector<Field> fields() {
    return {
        {"chat_template_kwargs",
         [](const std::string& v) { return chatWith(R"("chat_template_kwargs":{"x":)" + v + "}"); }, 3,
         "chat_template_kwargs.x"},
        {"tools[].function.parameters",
         [](const std::string& v) {
             return chatWith(
                 R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":)" +
                 v + "}}}}]");
         },
         7, "tools[0].function.parameters.properties.a"},
        {"tool_calls[].function.arguments",
         [](const std::string& v) {
             return "{" + kModel + R"(,"messages":[)" + kUser +
                    R"(,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":)" +
                    v + R"(}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]})";
         },
         7, "messages[1].tool_calls[0].function.arguments"},
        {"documents", [](const std::string& v) { return chatWith(R"("documents":)" + v); }, 2, "documents",
         Endpoint::chat_completions, false},
        {"messages[].content parts",
         [](const std::string& v) {
             return "{" + kModel + R"(,"messages":[{"role":"user","content":[{"type":"text","text":"hi","x":)" + v +
                    "}]}]}";
         },
         6, "messages[0].content[0].x"},
        {"tool_choice",
         [](const std::string& v) {
             return chatWith(
                 R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f","x":)" +
                 v + "}}");
         },
         4, "tool_choice.function.x"},
        {"stream_options",
         [](const std::string& v) { return chatWith(R"("stream_options":{"include_usage":false,"x":)" + v + "}"); }, 3,
         "stream_options.x"},
        {"response_format",
         [](const std::string& v) {
             return chatWith(R"("response_format":{"type":"json_schema","json_schema":{"name":"s","schema":)" + v +
                             "}}");
         },
         4, "response_format.json_schema.schema"},
        {"metadata (not read)", [](const std::string& v) { return chatWith(R"("metadata":)" + v); }, 2, "metadata"},
        {"prompt", [](const std::string& v) { return "{" + kModel + R"(,"prompt":)" + v + "}"; }, 2, "prompt",
         Endpoint::completions, false},
    };
}

std::string arrays(std::size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

std::string objects(std::size_t levels) {
    std::string out;
    out.reserve(6 * levels);
    for (std::size_t i = 0; i < levels; ++i) out += R"({"a":)";
    out += "1";
    out.append(levels, '}');
    return out;
}

std::string repeat(const std::string& segment, std::size_t times) {
    std::string out;
    for (std::size_t i = 0; i < times && out.size() <= kMaxJsonPathBytes; ++i) out += segment;
    return out;
}

bool isDepthRefusal(const Verdict& verdict) {
    const auto* refused = std::get_if<Refused>(&verdict);
    return refused != nullptr && refused->message.find("limits.max_json_depth") != std::string::npos;
}

// Each test runs with the fast JSON validation (the default) and the plain one.
class HostileJson : public ::testing::TestWithParam<bool> {
protected:
    HostileJson() { admitter_.setFastJsonValidation(GetParam()); }

    Admitter admitter_{test::referenceTokenizer(), test::referenceChatTemplate()};
    AdmissionLimits limits_;

    void expectNextRequestServed(const std::string& after) {
        EXPECT_TRUE(std::holds_alternative<Admitted>(
            admitter_.admit(chatWith(R"("n":1)"), Endpoint::chat_completions, limits_)))
            << "after " << after;
    }
};

TEST_P(HostileJson, EachFieldAtTheDepthLimitPassesOneLevelMoreIsRefusedNamingThePath) {
    for (const std::uint32_t limit : {16u, 256u}) {
        limits_.max_json_depth = limit;
        for (const Field& field : fields()) {
            // `levels` containers from the field's value down make the body nest `limit` deep.
            const std::size_t levels = limit - field.level + 1;
            for (const bool use_objects : {false, true}) {
                const char* shape = use_objects ? "objects" : "arrays";
                const auto value = [&](std::size_t n) { return use_objects ? objects(n) : arrays(n); };
                const Verdict at_limit = admitter_.admit(field.body(value(levels)), field.endpoint, limits_);
                EXPECT_FALSE(isDepthRefusal(at_limit)) << field.name << " " << shape << " at " << limit;
                if (field.admitted_at_limit) {
                    EXPECT_TRUE(std::holds_alternative<Admitted>(at_limit))
                        << field.name << " " << shape << " at " << limit << ": "
                        << std::get<Refused>(at_limit).message.substr(0, 300);
                }
                const Verdict over = admitter_.admit(field.body(value(levels + 1)), field.endpoint, limits_);
                ASSERT_TRUE(std::holds_alternative<Refused>(over)) << field.name << " " << shape << " at " << limit;
                const Refused& refused = std::get<Refused>(over);
                EXPECT_EQ(refused.http_status, 400u);
                EXPECT_EQ(refused.type, "invalid_request_error");
                // The container that opens level limit + 1 is `levels` below the value.
                const std::string path = clipJsonPath(field.path + repeat(use_objects ? ".a" : "[0]", levels));
                EXPECT_EQ(refused.param, path) << field.name << " " << shape << " at " << limit;
                EXPECT_EQ(refused.message,
                          path + ": nests deeper than " + std::to_string(limit) + " levels (limits.max_json_depth)")
                    << field.name;
            }
        }
    }
}

TEST_P(HostileJson, AThousandAHundredThousandAndAMillionLevelsAreRefusedInEveryField) {
    for (const Field& field : fields()) {
        for (const std::size_t levels : {1'000u, 100'000u, 1'000'000u}) {
            for (const bool use_objects : {false, true}) {
                // An unterminated million '[' as well: the refusal comes at the limit, not at the end.
                const std::string body = field.body(use_objects ? objects(levels) : arrays(levels));
                const Verdict verdict = admitter_.admit(body, field.endpoint, limits_);
                ASSERT_TRUE(isDepthRefusal(verdict)) << field.name << " " << levels;
                EXPECT_LE(std::get<Refused>(verdict).param.size(), kMaxJsonPathBytes);
                EXPECT_LT(errorBody(std::get<Refused>(verdict)).size(), 1024u);
            }
        }
        expectNextRequestServed(field.name);
    }
    const Verdict open_only =
        admitter_.admit("{" + kModel + R"(,"chat_template_kwargs":{"x":)" + std::string(1'000'000, '['),
                        Endpoint::chat_completions, limits_);
    EXPECT_TRUE(isDepthRefusal(open_only));
}

TEST_P(HostileJson, AMillionElementArrayAndAHundredThousandKeysPass) {
    std::string wide = "[0";
    for (int i = 1; i < 1'000'000; ++i) wide += ",0";
    wide += "]";
    std::string keys = "{";
    for (int i = 0; i < 100'000; ++i) keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    keys += "}";
    for (const std::string& value : {wide, keys}) {
        EXPECT_TRUE(std::holds_alternative<Admitted>(
            admitter_.admit(chatWith(R"("metadata":)" + value), Endpoint::chat_completions, limits_)));
        EXPECT_TRUE(std::holds_alternative<Admitted>(admitter_.admit(
            chatWith(R"("chat_template_kwargs":{"x":)" + value + "}"), Endpoint::chat_completions, limits_)));
    }
}

TEST_P(HostileJson, InvalidJsonInAFieldNobodyReadsIsRefusedNamingWhere) {
    struct Case {
        std::string body;
        std::string param;
        std::string message_part;
    };
    const std::vector<Case> cases = {
        {chatWith(R"("metadata":NaN)"), "metadata", "NaN and Infinity are not JSON values"},
        {chatWith(R"("metadata":Infinity)"), "metadata", "NaN and Infinity"},
        {chatWith(R"("metadata":-Infinity)"), "metadata", "invalid number"},
        {chatWith(R"("metadata":[1,,2])"), "metadata[1]", "expected a value"},
        {chatWith(R"("metadata":{"a" 1})"), "metadata.a", "expected ':'"},
        {chatWith(R"("metadata":tru)"), "metadata", "invalid literal"},
        {chatWith(R"("metadata":1.2.3)"), "metadata", "invalid number"},
        {chatWith(R"("metadata":[1,2,])"), "metadata[2]", "expected a value"},
        {chatWith(R"("metadata":{"a":1,})"), "metadata", "expected an object key"},
        {chatWith(R"("metadata":012)"), "metadata", "invalid number"},
        {chatWith(R"("metadata":"a\x")"), "metadata", "bad escape"},
        {chatWith("\"metadata\":\"a\x01\""), "metadata", "unescaped control character"},
        {chatWith(R"("metadata":"\ud800")"), "metadata", "lone surrogate"},
        {chatWith(R"("metadata":'a')"), "metadata", "expected a value"},
        {chatWith("\"metadata\":\"\xff\""), "body", "is not valid UTF-8 (byte offset"},
        {chatWith(R"("metadata":1)") + chatWith(R"("metadata":1)"), "body", "trailing content"},
        {chatWith(R"("metadata":1)") + "garbage", "body", "trailing content"},
        {"\xef\xbb\xbf" + chatWith(R"("metadata":1)"), "body", "expected a value"},
        {chatWith(R"("metadata":[1 2])"), "metadata[0]", "expected ',' or ']'"},
    };
    for (const Case& c : cases) {
        const Verdict verdict = admitter_.admit(c.body, Endpoint::chat_completions, limits_);
        ASSERT_TRUE(std::holds_alternative<Refused>(verdict)) << c.body;
        const Refused& refused = std::get<Refused>(verdict);
        EXPECT_EQ(refused.http_status, 400u) << c.body;
        EXPECT_EQ(refused.type, "invalid_request_error");
        EXPECT_EQ(refused.param, c.param) << c.body << ": " << refused.message;
        EXPECT_NE(refused.message.find(c.message_part), std::string::npos) << c.body << ": " << refused.message;
        EXPECT_NE(refused.message.find("byte offset"), std::string::npos) << refused.message;
        EXPECT_EQ(refused.message.rfind(c.param + ": ", 0), 0u) << refused.message;
    }
    // The same shapes in a completions request.
    const Verdict completions =
        admitter_.admit("{" + kModel + R"(,"prompt":"hi","metadata":[1,,2]})", Endpoint::completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(completions));
    EXPECT_EQ(std::get<Refused>(completions).param, "metadata[1]");
    // Any magnitude and any number of digits is JSON; what a field may hold is its reader's business.
    EXPECT_TRUE(std::holds_alternative<Admitted>(admitter_.admit(
        chatWith(R"("metadata":[1e999,-0.0,123456789012345678901234567890])"), Endpoint::chat_completions, limits_)));
}

TEST_P(HostileJson, ErrorsQuoteAtMostABoundedPieceOfTheRequest) {
    const std::string huge(1 << 20, 'k');
    // A megabyte key on the way to the fault.
    Verdict verdict =
        admitter_.admit(chatWith(R"("metadata":{")" + huge + R"(":NaN})"), Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(verdict));
    EXPECT_EQ(std::get<Refused>(verdict).param, "metadata." + std::string(kMaxJsonPathKeyBytes, 'k'));
    EXPECT_LT(errorBody(std::get<Refused>(verdict)).size(), 1024u);
    // A path of 255 keys of 100 bytes each.
    std::string deep;
    for (int i = 0; i < 255; ++i) deep += "{\"" + std::string(100, 'p') + "\":";
    deep += "[[1]]" + std::string(255, '}');
    verdict = admitter_.admit(chatWith(R"("metadata":)" + deep), Endpoint::chat_completions, limits_);
    ASSERT_TRUE(isDepthRefusal(verdict));
    const Refused& deep_refusal = std::get<Refused>(verdict);
    EXPECT_EQ(deep_refusal.param.size(), kMaxJsonPathBytes);
    EXPECT_EQ(deep_refusal.param.substr(0, 9), "metadata.");
    EXPECT_LT(errorBody(deep_refusal).size(), 1024u);
    // Two-byte characters in the keys: the cut never splits one.
    std::string accented;
    for (int i = 0; i < 300; ++i) accented += "{\"\xc3\xa9\xc3\xa9\":";
    verdict = admitter_.admit(chatWith(R"("metadata":)" + accented + "1" + std::string(300, '}')),
                              Endpoint::chat_completions, limits_);
    ASSERT_TRUE(isDepthRefusal(verdict));
    EXPECT_EQ(findInvalidUtf8(std::get<Refused>(verdict).param), kValidUtf8);
    // A reader's refusal under a megabyte key.
    verdict = admitter_.admit(chatWith(R"("documents":[{")" + huge + R"(":5}])"), Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(verdict));
    EXPECT_EQ(std::get<Refused>(verdict).param, "documents[0]." + std::string(kMaxJsonPathKeyBytes, 'k'));
    EXPECT_LT(errorBody(std::get<Refused>(verdict)).size(), 1024u);
    // A megabyte model name and tool name.
    verdict = admitter_.admit(R"({"model":")" + huge + R"(","messages":[)" + kUser + "]}", Endpoint::chat_completions,
                              limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(verdict));
    EXPECT_LT(errorBody(std::get<Refused>(verdict)).size(), 1024u);
    verdict = admitter_.admit(chatWith(R"("tools":[{"type":"function","function":{"name":"f"}}],)"
                                       R"("tool_choice":{"type":"function","function":{"name":")" +
                                       huge + R"("}})"),
                              Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(verdict));
    EXPECT_LT(errorBody(std::get<Refused>(verdict)).size(), 1024u);
    // A megabyte part type.
    verdict = admitter_.admit("{" + kModel + R"(,"messages":[{"role":"user","content":[{"type":")" + huge + R"("}]}]})",
                              Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(verdict));
    EXPECT_LT(errorBody(std::get<Refused>(verdict)).size(), 1024u);
    // A megabyte number where an integer belongs.
    verdict =
        admitter_.admit(chatWith(R"("max_tokens":)" + std::string(1 << 20, '9')), Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(verdict));
    EXPECT_LT(errorBody(std::get<Refused>(verdict)).size(), 1024u);
}

TEST_P(HostileJson, NIsHeldToTheLimitAndCountedInTheOutputReservation) {
    limits_.max_n = 8;
    Verdict verdict = admitter_.admit(chatWith(R"("n":8,"max_tokens":100)"), Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Admitted>(verdict));
    EXPECT_EQ(std::get<Admitted>(verdict).n, 8u);
    EXPECT_EQ(std::get<Admitted>(verdict).output_budget, 100u);
    EXPECT_EQ(std::get<Admitted>(verdict).output_reservation_tokens, 800u);
    verdict = admitter_.admit(chatWith(R"("n":null)"), Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Admitted>(verdict));
    EXPECT_EQ(std::get<Admitted>(verdict).n, 1u);
    EXPECT_EQ(std::get<Admitted>(verdict).output_reservation_tokens, limits_.max_output_tokens);

    for (const std::string n : {"9", "10000000000", "18446744073709551616", "99999999999999999999999999"}) {
        verdict = admitter_.admit(chatWith(R"("n":)" + n), Endpoint::chat_completions, limits_);
        ASSERT_TRUE(std::holds_alternative<Refused>(verdict)) << n;
        const Refused& refused = std::get<Refused>(verdict);
        EXPECT_EQ(refused.http_status, 400u);
        EXPECT_EQ(refused.param, "n");
        EXPECT_EQ(refused.message, "n: " + n + " is above the limit 8 (limits.max_n)");
    }
    // Completions too.
    verdict = admitter_.admit("{" + kModel + R"(,"prompt":"hi","n":9})", Endpoint::completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(verdict));
    EXPECT_EQ(std::get<Refused>(verdict).param, "n");
    // Below 1 or not an integer: refused as before.
    for (const std::string n : {"0", "-1", "1.5", "\"2\"", "true", "-99999999999999999999"}) {
        verdict = admitter_.admit(chatWith(R"("n":)" + n), Endpoint::chat_completions, limits_);
        ASSERT_TRUE(std::holds_alternative<Refused>(verdict)) << n;
        EXPECT_EQ(std::get<Refused>(verdict).param, "n") << n;
        EXPECT_EQ(std::get<Refused>(verdict).message.find("limits.max_n"), std::string::npos) << n;
    }
    limits_.max_n = 128;
    EXPECT_TRUE(
        std::holds_alternative<Admitted>(admitter_.admit(chatWith(R"("n":128)"), Endpoint::chat_completions, limits_)));
}

TEST_P(HostileJson, TheWindowIsCheckedPerSequenceWhateverN) {
    // vLLM checks prompt + max_tokens <= max_model_len for each sequence, n apart.
    limits_.window_tokens = 40000;
    const Verdict verdict =
        admitter_.admit(chatWith(R"("n":8,"max_tokens":32768)"), Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Admitted>(verdict));
    EXPECT_EQ(std::get<Admitted>(verdict).output_reservation_tokens, 8u * 32768u);
}

INSTANTIATE_TEST_SUITE_P(Validation, HostileJson, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "fast" : "plain"; });

}  // namespace
}  // namespace dpgate::admission
