// Malformed bodies: each a 4xx whose message names the
// problem, and the Admitter serving the next request normally.
#include <gtest/gtest.h>

#include "admission/admit.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

struct Case {
    const char* name;
    std::string body;
    std::string param;         // expected param
    std::string message_part;  // expected in the message
};

const std::string kHead = R"({"model":"ds-v4.1-flash-1017",)";
std::string withMessages(const std::string& messages) { return kHead + R"("messages":)" + messages + "}"; }
std::string withField(const std::string& field) {
    return kHead + field + R"(,"messages":[{"role":"user","content":"hi"}]})";
}
std::string withPart(const std::string& part) { return withMessages(R"([{"role":"user","content":[)" + part + "]}]"); }

std::vector<Case> cases() {
    std::vector<Case> c = {
        {"empty", "", "body", "empty"},
        {"whitespace", "   ", "body", ""},
        {"truncated", R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user")", "", "malformed JSON"},
        {"truncated_string", R"({"model":"ds-v4.1-fl)", "", "malformed JSON"},
        {"top_array", "[1,2]", "body", "must be a JSON object"},
        {"top_string", "\"hi\"", "body", "must be a JSON object"},
        {"top_number", "42", "body", "must be a JSON object"},
        {"top_null", "null", "body", "must be a JSON object"},
        {"trailing_garbage", withField(R"("n":1)") + "xyz", "body", "malformed JSON"},
        {"two_documents", withField(R"("n":1)") + withField(R"("n":1)"), "body", "trailing content"},
        {"missing_messages", R"({"model":"ds-v4.1-flash-1017"})", "messages", "missing"},
        {"messages_null", withMessages("null"), "messages", "must be an array"},
        {"messages_object", withMessages("{}"), "messages", "must be an array"},
        {"messages_empty", withMessages("[]"), "messages", "at least one"},
        {"message_string", withMessages(R"(["hi"])"), "messages[0]", "must be an object"},
        {"role_missing", withMessages(R"([{"content":"x"}])"), "messages[0].role", "missing"},
        {"role_number", withMessages(R"([{"role":1,"content":"x"}])"), "messages[0].role", "must be a string"},
        {"content_number", withMessages(R"([{"role":"user","content":5}])"), "messages[0].content", "must be a string"},
        {"part_not_object", withPart("5"), "messages[0].content[0]", "must be an object"},
        {"part_no_type", withPart(R"({"text":"x"})"), "messages[0].content[0].type", "missing"},
        {"part_unknown_type", withPart(R"({"type":"audio"})"), "messages[0].content[0].type",
         "unsupported content part"},
        {"image_no_url", withPart(R"({"type":"text","text":"a"},{"type":"image_url"})"),
         "messages[0].content[1].image_url", "missing"},
        {"image_url_empty_object", withPart(R"({"type":"image_url","image_url":{}})"),
         "messages[0].content[0].image_url.url", "missing"},
        {"image_url_number", withPart(R"({"type":"image_url","image_url":{"url":5}})"),
         "messages[0].content[0].image_url.url", "must be a string"},
        {"image_url_array", withPart(R"({"type":"image_url","image_url":[]})"), "messages[0].content[0].image_url",
         "must be an object"},
        {"tool_calls_object", withMessages(R"([{"role":"assistant","content":null,"tool_calls":{}}])"),
         "messages[0].tool_calls", "must be an array"},
        {"tool_call_no_function",
         withMessages(R"([{"role":"assistant","content":null,"tool_calls":[{"type":"function"}]}])"),
         "messages[0].tool_calls[0].function", "missing"},
        {"tool_call_no_name",
         withMessages(
             R"([{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"arguments":"{}"}}]}])"),
         "messages[0].tool_calls[0].function.name", "must be a string"},
        {"model_number", R"({"model":5,"messages":[{"role":"user","content":"x"}]})", "model", "must be a string"},
        {"model_missing", R"({"messages":[{"role":"user","content":"x"}]})", "model", "missing"},
        {"max_tokens_negative", withField(R"("max_tokens":-1)"), "max_tokens", "at least 1"},
        {"max_tokens_zero", withField(R"("max_tokens":0)"), "max_tokens", "at least 1"},
        {"max_tokens_float", withField(R"("max_tokens":100.5)"), "max_tokens", "must be an integer"},
        {"max_tokens_float_integral", withField(R"("max_tokens":100.0)"), "max_tokens", "must be an integer"},
        {"max_tokens_string", withField(R"("max_tokens":"100")"), "max_tokens", "must be an integer"},
        {"max_tokens_null", withField(R"("max_tokens":null)"), "max_tokens", "must be an integer"},
        {"max_tokens_bool", withField(R"("max_tokens":true)"), "max_tokens", "must be an integer"},
        {"max_tokens_1e400", withField(R"("max_tokens":1e400)"), "max_tokens", ""},
        {"max_tokens_2_64", withField(R"("max_tokens":18446744073709551616)"), "max_tokens",
         "above the output limit 32768"},
        {"max_tokens_2_63", withField(R"("max_tokens":9223372036854775808)"), "max_tokens", "above the output limit"},
        {"max_tokens_over", withField(R"("max_tokens":32769)"), "max_tokens", "32769 is above the output limit 32768"},
        {"max_completion_tokens_over", withField(R"("max_completion_tokens":100000)"), "max_completion_tokens",
         "above the output limit"},
        {"max_tokens_twice", withField(R"("max_tokens":5,"max_tokens":6)"), "max_tokens", "appears twice"},
        {"stream_string", withField(R"("stream":"yes")"), "stream", "must be a boolean"},
        {"stream_options_array", withField(R"("stream_options":[])"), "stream_options", "must be an object"},
        {"include_usage_number", withField(R"("stream_options":{"include_usage":1})"), "stream_options.include_usage",
         "must be a boolean"},
        {"n_zero", withField(R"("n":0)"), "n", ">= 1"},
        {"prompt_cache_key_number", withField(R"("prompt_cache_key":5)"), "prompt_cache_key", "must be a string"},
        {"user_object", withField(R"("user":{})"), "user", "must be a string"},
        {"lone_high_surrogate", withMessages(R"([{"role":"user","content":"a\ud800b"}])"), "messages[0].content",
         "surrogate"},
        {"lone_low_surrogate", withMessages(R"([{"role":"user","content":"a\udc00"}])"), "messages[0].content",
         "surrogate"},
        {"bad_escape", withMessages(R"([{"role":"user","content":"a\qb"}])"), "messages[0].content", "bad escape"},
        {"invalid_utf8", withMessages("[{\"role\":\"user\",\"content\":\"a\xff\xfe\"}]"), "body",
         "not valid UTF-8 (byte offset 69)"},
        {"overlong_utf8", withMessages("[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]"), "body", "not valid UTF-8"},
        {"control_char", withMessages("[{\"role\":\"user\",\"content\":\"a\x01\"}]"), "", ""},
        {"deep_nesting", kHead + R"("x":)" + std::string(200000, '[') + std::string(200000, ']') + "}", "", ""},
        {"deep_messages", kHead + R"("messages":)" + std::string(200000, '[') + std::string(200000, ']') + "}", "", ""},
        {"unterminated_deep", std::string(200000, '{'), "", ""},
        {"no_close_brace", withField(R"("n":1)").substr(0, withField(R"("n":1)").size() - 1), "", ""},
    };
    // A 10 MB single string: admitted or refused by the window, never a shape error.
    return c;
}

TEST(MalformedBody, EachIsA4xxNamingTheProblem) {
    Admitter admitter(test::referenceTokenizer(), test::referenceChatTemplate());
    Admitter plain(test::referenceTokenizer(), test::referenceChatTemplate());
    admitter.setFastJsonValidation(true);  // whatever DPGATE_PLAIN says
    plain.setFastJsonValidation(false);
    AdmissionLimits limits;
    const std::vector<Case> all = cases();
    EXPECT_GE(all.size(), 40u);
    for (const Case& c : all) {
        // The plain JSON validation answers in the same words.
        const Verdict plain_verdict = plain.admit(c.body, Endpoint::chat_completions, limits);
        ASSERT_TRUE(std::holds_alternative<Refused>(plain_verdict)) << c.name;
        const Verdict verdict = admitter.admit(c.body, Endpoint::chat_completions, limits);
        ASSERT_TRUE(std::holds_alternative<Refused>(verdict)) << c.name;
        const Refused& r = std::get<Refused>(verdict);
        EXPECT_GE(r.http_status, 400u) << c.name;
        EXPECT_LT(r.http_status, 500u) << c.name;
        EXPECT_FALSE(r.message.empty()) << c.name;
        if (!c.param.empty()) {
            EXPECT_EQ(r.param, c.param) << c.name << ": " << r.message;
        }
        if (!c.message_part.empty()) {
            EXPECT_NE(r.message.find(c.message_part), std::string::npos) << c.name << ": " << r.message;
        }
        EXPECT_EQ(std::get<Refused>(plain_verdict).param, r.param) << c.name;
        EXPECT_EQ(std::get<Refused>(plain_verdict).message, r.message) << c.name;
        // The next request is served normally.
        const Verdict next =
            admitter.admit(R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":"ok"}]})",
                           Endpoint::chat_completions, limits);
        EXPECT_TRUE(std::holds_alternative<Admitted>(next)) << "after " << c.name;
    }
}

// Each reader's array or object names the element or member it refuses, in
// full: the param and the whole message, for both endpoints and both JSON
// validations.
TEST(MalformedBody, ElementsAndMembersAreNamedInFull) {
    struct Exact {
        Endpoint endpoint;
        std::string body;
        std::string param;
        std::string message;
    };
    const auto prompt = [](const std::string& value) { return kHead + R"("prompt":)" + value + "}"; };
    const std::string tool = R"("tools":[{"type":"function","function":{"name":"f"}}],)";
    const std::vector<Exact> all = {
        {Endpoint::completions, prompt("[]"), "prompt", "prompt: must not be empty"},
        {Endpoint::completions, prompt(R"(["a",1])"), "prompt[1]", "prompt[1]: must have the type of prompt[0]"},
        {Endpoint::completions, prompt("[[1,2],[]]"), "prompt[1]", "prompt[1]: must not be empty"},
        {Endpoint::completions, prompt("[[1,-2]]"), "prompt[0][1]",
         "prompt[0][1]: must be a token id (a non-negative integer)"},
        {Endpoint::completions, prompt("[1,4294967296]"), "prompt[1]",
         "prompt[1]: must be a token id (a non-negative integer)"},
        {Endpoint::completions, prompt("[true]"), "prompt[0]",
         "prompt[0]: must be a string, a token id or an array of token ids"},
        {Endpoint::chat_completions, withField(tool + R"("tool_choice":{"type":"function","function":{"x":1}})"),
         "tool_choice.function.name", "tool_choice.function.name: missing (a named tool choice needs function.name)"},
        {Endpoint::chat_completions, withField(tool + R"("tool_choice":{"type":"auto"})"), "tool_choice.type",
         R"(tool_choice.type: must be "function")"},
        {Endpoint::chat_completions,
         withField(R"("tools":[{"type":"function","function":{"name":"f","defer_loading":1}}])"),
         "tools[0].function.defer_loading", "tools[0].function.defer_loading: must be a boolean or null"},
        {Endpoint::chat_completions, withField(R"("tools":[{"type":"function","function":{"description":"d"}}])"),
         "tools[0].function.name", "tools[0].function.name: missing (a tool needs function.name)"},
        {Endpoint::chat_completions, withField(R"("tools":[{"type":"function"}])"), "tools[0].function",
         "tools[0].function: missing (a tool needs a function definition)"},
        {Endpoint::chat_completions,
         withMessages(R"([{"role":"assistant","tool_calls":[{"id":5,"type":"function","function":{"name":"f"}}]}])"),
         "messages[0].tool_calls[0].id", "messages[0].tool_calls[0].id: must be a string"},
        {Endpoint::chat_completions,
         withMessages(R"([{"role":"user","content":"x"},{"role":"tool","content":"y","tool_call_id":[]}])"),
         "messages[1].tool_call_id", "messages[1].tool_call_id: must be a string"},
        {Endpoint::chat_completions, withField(R"("documents":[{"a":"b"},{"c":1}])"), "documents[1].c",
         "documents[1].c: must be a string"},
        // A second copy is read before it is refused as one: an empty one is empty.
        {Endpoint::chat_completions, withMessages(R"([{"role":"user","content":"x"}],"messages":[])"), "messages",
         "messages: must contain at least one message"},
    };
    Admitter admitter(test::referenceTokenizer(), test::referenceChatTemplate());
    Admitter plain(test::referenceTokenizer(), test::referenceChatTemplate());
    plain.setFastJsonValidation(false);
    AdmissionLimits limits;
    for (const Exact& c : all) {
        for (Admitter* a : {&admitter, &plain}) {
            const Verdict verdict = a->admit(c.body, c.endpoint, limits);
            ASSERT_TRUE(std::holds_alternative<Refused>(verdict)) << c.body;
            const Refused& r = std::get<Refused>(verdict);
            EXPECT_EQ(r.http_status, 400u) << c.body;
            EXPECT_EQ(r.param, c.param) << c.body;
            EXPECT_EQ(r.message, c.message) << c.body;
        }
    }
}

TEST(MalformedBody, TenMegabyteStringIsCountedNotRefusedAsMalformed) {
    Admitter admitter(test::referenceTokenizer(), test::referenceChatTemplate());
    AdmissionLimits limits;
    const std::string body = withMessages(R"([{"role":"user","content":")" + std::string(10u << 20, 'a') + R"("}])");
    const Verdict v = admitter.admit(body, Endpoint::chat_completions, limits);
    ASSERT_TRUE(std::holds_alternative<Refused>(v));
    EXPECT_EQ(std::get<Refused>(v).code, "context_length_exceeded");  // 10 MB of 'a' is > 1M tokens
    limits.window_tokens = 64u << 20;
    EXPECT_TRUE(std::holds_alternative<Admitted>(admitter.admit(body, Endpoint::chat_completions, limits)));
}

TEST(MalformedBody, ErrorBodyIsOpenAiShaped) {
    Refused r;
    r.message = "m";
    r.param = "max_tokens";
    EXPECT_EQ(errorBody(r),
              R"({"error":{"code":null,"message":"m","param":"max_tokens","type":"invalid_request_error"}})");
}

}  // namespace
}  // namespace dpgate::admission
