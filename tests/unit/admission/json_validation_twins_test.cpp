// The fast JSON validation (stage 1, jsonDepthWithin, the readers checking
// what they read and checkUnread what they skip) against the plain one
// (JsonValidator over every byte first): invalid JSON in every place a reader
// reads or skips is refused by both, in the same words. A place a reader
// skips without checkUnread fails here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "admission/admit.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

const std::string kHead = R"({"model":"ds-v4.1-flash-1017",)";
const std::string kTools = R"("tools":[{"type":"function","function":{"name":"f"}}],)";

struct Slot {
    const char* name;
    std::string body;  // `@` is where the value goes
    Endpoint endpoint = Endpoint::chat_completions;
};

std::vector<Slot> slots() {
    const std::string user = R"("messages":[{"role":"user","content":"hi"}])";
    const auto chat = [&](const std::string& fields) { return kHead + fields + user + "}"; };
    const auto message = [&](const std::string& fields) {
        return kHead + R"("messages":[{"role":"user",)" + fields + "}]}";
    };
    const auto part = [&](const std::string& part) {
        return kHead + R"("messages":[{"role":"user","content":[)" + part + "]}]}";
    };
    const auto call = [&](const std::string& call) {
        return kHead +
               R"("messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[)" +
               call + "]}]}";
    };
    return {
        {"top-level field nobody reads", chat(R"("metadata":@,)")},
        {"top-level field of the other endpoint", chat(R"("prompt":@,)")},
        {"message field nobody reads", message(R"("content":"hi","x":@)")},
        {"message content", message(R"("content":@)")},
        {"message role", message(R"("content":"hi","role":@)")},
        {"message name", message(R"("content":"hi","name":@)")},
        {"message reasoning_content", message(R"("content":"hi","reasoning_content":@)")},
        {"message tool_call_id", message(R"("content":"hi","tool_call_id":@)")},
        {"content part field nobody reads", part(R"({"type":"text","text":"hi","x":@})")},
        {"content part text", part(R"({"type":"text","text":@})")},
        {"content part refusal of a text part", part(R"({"type":"text","text":"hi","refusal":@})")},
        {"content part type", part(R"({"type":@,"text":"hi"})")},
        {"content part bare", part(R"(@)")},
        {"image_url as a string", part(R"({"type":"image_url","image_url":@})")},
        {"image_url.url", part(R"({"type":"image_url","image_url":{"url":@}})")},
        {"image_url field nobody reads", part(R"({"type":"image_url","image_url":{"url":"data:,","x":@}})")},
        {"tool call field nobody reads", call(R"({"id":"c","type":"function","function":{"name":"f"},"x":@})")},
        {"tool call id", call(R"({"id":@,"type":"function","function":{"name":"f"}})")},
        {"tool call function field nobody reads",
         call(R"({"id":"c","type":"function","function":{"name":"f","arguments":"{}","x":@}})")},
        {"tool call arguments", call(R"({"id":"c","type":"function","function":{"name":"f","arguments":@}})")},
        {"tool call arguments inside",
         call(R"({"id":"c","type":"function","function":{"name":"f","arguments":{"a":[@]}}})")},
        {"tool field nobody reads", chat(R"("tools":[{"type":"function","function":{"name":"f"},"x":@}],)")},
        {"tool function field nobody reads", chat(R"("tools":[{"type":"function","function":{"name":"f","x":@}}],)")},
        {"tool description", chat(R"("tools":[{"type":"function","function":{"name":"f","description":@}}],)")},
        {"tool parameters inside",
         chat(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","x":@}}}],)")},
        {"tool strict", chat(R"("tools":[{"type":"function","function":{"name":"f","strict":@}}],)")},
        {"stream_options field nobody reads", chat(R"("stream_options":{"include_usage":true,"x":@},)")},
        {"stream_options.include_usage", chat(R"("stream_options":{"include_usage":@},)")},
        {"tool_choice field nobody reads",
         chat(kTools + R"("tool_choice":{"type":"function","function":{"name":"f"},"x":@},)")},
        {"tool_choice.function field nobody reads",
         chat(kTools + R"("tool_choice":{"type":"function","function":{"name":"f","x":@}},)")},
        {"tool_choice", chat(kTools + R"("tool_choice":@,)")},
        {"chat_template_kwargs inside", chat(R"("chat_template_kwargs":{"x":@},)")},
        {"documents inside", chat(R"("documents":[{"x":@}],)")},
        {"max_tokens", chat(R"("max_tokens":@,)")},
        {"n", chat(R"("n":@,)")},
        {"stream", chat(R"("stream":@,)")},
        {"user", chat(R"("user":@,)")},
        {"reasoning_effort", chat(R"("reasoning_effort":@,)")},
        {"truncate_prompt_tokens", chat(R"("truncate_prompt_tokens":@,)")},
        {"completions prompt", kHead + R"("prompt":@})", Endpoint::completions},
        {"completions prompt element", kHead + R"("prompt":["a",@]})", Endpoint::completions},
        {"completions prompt ids", kHead + R"("prompt":[[1,@]]})", Endpoint::completions},
        {"completions field nobody reads", kHead + R"("prompt":"hi","x":@})", Endpoint::completions},
        {"completions messages (not read there)", kHead + R"("prompt":"hi","messages":@})", Endpoint::completions},
    };
}

// Invalid JSON values, and a few valid ones the twins must treat alike too.
const std::vector<std::string> kValues = {
    "NaN",
    "Infinity",
    "-Infinity",
    "[1,,2]",
    R"({"a" 1})",
    "tru",
    "truex",
    "nul",
    "nulll",
    "1.2.3",
    "01",
    "-",
    "1e",
    ".5",
    R"("\q")",
    R"("\ud800")",
    R"("\udc00x")",
    R"("\u12")",
    "[1,2,]",
    R"({"a":1,})",
    "[1 2]",
    R"(["a" "b"])",
    R"({"a":1 "b":2})",
    R"({"a":[1}])",
    "[",
    "'x'",
    "{1:2}",
    R"("a"x)",
    // A string then ':' reads as a key to On Demand's skip, which then took a
    // stray '}' for the end of the value and read on as if the body were valid.
    R"("a":"b")",
    R"("a":1)",
    R"("a":1})",
    R"("a":[1]])",
    R"(1:2)",
    R"(true:"b")",
    // valid
    "null",
    "1",
    R"("x")",
    R"({"a":[1,{"b":null}]})",
    "[]",
    R"("\u00e9\ud83d\ude00")",
    "true",
    "-0.5e+3",
};

std::string fill(const std::string& body, const std::string& value) {
    std::string out = body;
    out.replace(out.find('@'), 1, value);
    return out;
}

TEST(JsonValidationTwins, EveryPlaceAReaderReadsOrSkipsIsValidatedAlike) {
    Admitter fast(test::referenceTokenizer(), test::referenceChatTemplate());
    Admitter plain(test::referenceTokenizer(), test::referenceChatTemplate());
    fast.setFastJsonValidation(true);  // whatever DPGATE_PLAIN says
    plain.setFastJsonValidation(false);
    AdmissionLimits limits;
    for (const Slot& slot : slots()) {
        for (const std::string& value : kValues) {
            const std::string body = fill(slot.body, value);
            const Verdict a = fast.admit(body, slot.endpoint, limits);
            const Verdict b = plain.admit(body, slot.endpoint, limits);
            const std::string where = std::string(slot.name) + " = " + value;
            ASSERT_EQ(a.index(), b.index()) << where;
            if (const auto* refused = std::get_if<Refused>(&a)) {
                EXPECT_EQ(refused->http_status, std::get<Refused>(b).http_status) << where;
                EXPECT_EQ(refused->param, std::get<Refused>(b).param) << where;
                EXPECT_EQ(refused->message, std::get<Refused>(b).message) << where;
            }
        }
    }
}

TEST(JsonValidationTwins, ValidJsonWhereNoReaderLooksIsAdmitted) {
    Admitter fast(test::referenceTokenizer(), test::referenceChatTemplate());
    AdmissionLimits limits;
    for (const Slot& slot : slots()) {
        if (std::string(slot.name).find("nobody reads") == std::string::npos) continue;
        bool valid = false;
        for (const std::string& value : kValues) {
            valid = valid || value == "null";
            if (!valid) continue;
            const Verdict verdict = fast.admit(fill(slot.body, value), slot.endpoint, limits);
            EXPECT_TRUE(std::holds_alternative<Admitted>(verdict))
                << slot.name << " = " << value << ": " << std::get<Refused>(verdict).message;
        }
    }
}

TEST(JsonValidationTwins, InvalidJsonIsRefusedInEveryPlace) {
    Admitter fast(test::referenceTokenizer(), test::referenceChatTemplate());
    AdmissionLimits limits;
    for (const Slot& slot : slots()) {
        for (const std::string& value : kValues) {
            if (value == "null") break;  // the valid ones follow
            const Verdict verdict = fast.admit(fill(slot.body, value), slot.endpoint, limits);
            ASSERT_TRUE(std::holds_alternative<Refused>(verdict)) << slot.name << " = " << value;
            EXPECT_EQ(std::get<Refused>(verdict).http_status, 400u);
            EXPECT_NE(std::get<Refused>(verdict).message.find("byte offset"), std::string::npos)
                << slot.name << " = " << value << ": " << std::get<Refused>(verdict).message;
        }
    }
}

}  // namespace
}  // namespace dpgate::admission
