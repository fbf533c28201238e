// admit(): the rules in the order admit() applies them, with the real tokenizer.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "admission/admit.hpp"
#include "routing/affinity_key.hpp"
#include "test_support.hpp"

namespace dpgate::admission {
namespace {

class AdmitTest : public ::testing::Test {
protected:
    AdmitTest() : admitter_(test::referenceTokenizer(), test::referenceChatTemplate()) {}

    Verdict admit(const std::string& body, Endpoint endpoint = Endpoint::chat_completions) {
        return admitter_.admit(body, endpoint, limits_);
    }
    Refused refused(const std::string& body, Endpoint endpoint = Endpoint::chat_completions) {
        Verdict verdict = admit(body, endpoint);
        EXPECT_TRUE(std::holds_alternative<Refused>(verdict)) << body.substr(0, 200);
        return std::holds_alternative<Refused>(verdict) ? std::get<Refused>(verdict) : Refused{};
    }
    Admitted admitted(const std::string& body, Endpoint endpoint = Endpoint::chat_completions) {
        Verdict verdict = admit(body, endpoint);
        EXPECT_TRUE(std::holds_alternative<Admitted>(verdict))
            << body.substr(0, 200) << " -> "
            << (std::holds_alternative<Refused>(verdict) ? std::get<Refused>(verdict).message : "");
        return std::holds_alternative<Admitted>(verdict) ? std::get<Admitted>(verdict) : Admitted{};
    }
    // Exact prompt tokens of a chat body, counted with a fresh counter.
    std::uint64_t exactTokens(const std::string& body) {
        AdmissionLimits wide = limits_;
        wide.window_tokens = 1;  // forces the exact count; read it from the refusal
        Verdict verdict = admitter_.admit(body, Endpoint::chat_completions, wide);
        const auto& r = std::get<Refused>(verdict);
        const auto open = r.message.find('(');
        return std::stoull(r.message.substr(open + 1));
    }

    AdmissionLimits limits_;
    Admitter admitter_;
};

std::string chat(const std::string& text, int images = 0, const std::string& extra = "") {
    nlohmann::json content = nlohmann::json::array({{{"type", "text"}, {"text", text}}});
    for (int i = 0; i < images; ++i)
        content.push_back({{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}});
    nlohmann::json body = {{"model", "ds-v4.1-flash-1017"}, {"messages", {{{"role", "user"}, {"content", content}}}}};
    std::string out = body.dump();
    if (!extra.empty()) out.insert(1, extra + ",");
    return out;
}

TEST_F(AdmitTest, SmallRequestCountedExactlyWithInsertedBudget) {
    const std::string body = R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":"hi"}]})";
    const Admitted a = admitted(body);
    // Every count is exact, so the backend's usage can verify it.
    EXPECT_TRUE(a.counted);
    EXPECT_EQ(a.prompt_tokens, 4u);  // <｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>
    EXPECT_EQ(a.output_budget, 32768u);
    EXPECT_TRUE(a.inserted_max_tokens);
    EXPECT_EQ(splicedBody(body, a),
              R"({"max_tokens":32768,"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":"hi"}]})");
}

TEST_F(AdmitTest, SpliceKeepsEveryOtherByte) {
    const std::string body =
        "  \n{ \"messages\" : [{\"role\":\"user\",\"content\":\"x\\u00e9\"}], \"model\":\"ds-v4.1-flash-1017\" }\n";
    const Admitted a = admitted(body);
    ASSERT_TRUE(a.inserted_max_tokens);
    const std::string out = splicedBody(body, a);
    EXPECT_EQ(out,
              "  \n{\"max_tokens\":32768, \"messages\" : [{\"role\":\"user\",\"content\":\"x\\u00e9\"}], "
              "\"model\":\"ds-v4.1-flash-1017\" }\n");
    EXPECT_TRUE(nlohmann::json::accept(out));
}

TEST_F(AdmitTest, ExplicitBudgetNotSpliced) {
    const Admitted a = admitted(chat("hello", 0, R"("max_tokens":100)"));
    EXPECT_FALSE(a.inserted_max_tokens);
    EXPECT_EQ(a.output_budget, 100u);
    const Admitted b = admitted(chat("hello", 0, R"("max_tokens":100,"max_completion_tokens":7)"));
    EXPECT_EQ(b.output_budget, 7u);  // vLLM reads max_completion_tokens first
}

TEST_F(AdmitTest, AffinityMaterial) {
    const std::string one =
        R"({"model":"ds-v4.1-flash-1017","prompt_cache_key":"abc","user":"u1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"S"},{"role":"user","content":"first"}]})";
    const std::string two =
        R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"system","content":"S"},{"role":"user","content":"first"},{"role":"assistant","content":"a"},{"role":"user","content":"second"}]})";
    const std::string other =
        R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"system","content":"S"},{"role":"user","content":"other"}]})";
    const Admitted a = admitted(one);
    EXPECT_TRUE(a.has_prompt_cache_key);
    EXPECT_EQ(a.prompt_cache_key, "abc");
    EXPECT_EQ(a.user, "u1");
    EXPECT_TRUE(a.stream);
    EXPECT_TRUE(a.include_usage);
    EXPECT_EQ(a.head_hash, admitted(two).head_hash);
    EXPECT_NE(a.head_hash, admitted(other).head_hash);
}

// The head key is routing's, over the leading system messages and the first
// other one, whatever the earlier requests on this admitter left in its
// scratch: fewer messages, more, short texts (kept inside their strings) and
// a head too long to keep.
TEST_F(AdmitTest, HeadKeyIsRoutingsKeyOfTheHeadAcrossRequests) {
    auto body = [](const std::vector<std::string>& systems, const std::string& user) {
        nlohmann::json messages = nlohmann::json::array();
        for (const std::string& text : systems) messages.push_back({{"role", "system"}, {"content", text}});
        messages.push_back({{"role", "user"}, {"content", user}});
        messages.push_back({{"role", "assistant"}, {"content", "later turns are not in the head"}});
        return nlohmann::json{{"model", "ds-v4.1-flash-1017"}, {"messages", messages}}.dump();
    };
    auto expected = [](const std::vector<std::string>& systems, const std::string& user) {
        routing::ConversationView view;
        for (const std::string& text : systems) view.messages.push_back({"system", text});
        view.messages.push_back({"user", user});
        return routing::conversationHeadKey(view);
    };
    const std::vector<std::vector<std::string>> heads = {{"a"},
                                                         {"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"},
                                                         {},
                                                         {std::string(100 * 1024, 'x'), "b"},
                                                         {"c", "d"}};
    for (int pass = 0; pass < 2; ++pass)
        for (const auto& systems : heads)
            EXPECT_EQ(admitted(body(systems, "u")).head_hash, expected(systems, "u")) << systems.size();
}

// Content given as parts: the head holds a message's text parts joined with
// "\n" (vLLM's string content), images left out; one text part is the
// string itself. Messages of one part and of several mix in one head, and
// pass after pass on one admitter.
TEST_F(AdmitTest, HeadKeyJoinsTextParts) {
    const nlohmann::json image = {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}};
    auto text = [](const std::string& t) { return nlohmann::json{{"type", "text"}, {"text", t}}; };
    const std::vector<std::pair<nlohmann::json, std::string>> contents = {
        {nlohmann::json::array({text("only")}), "only"},
        {nlohmann::json::array({text("a"), text("b")}), "a\nb"},
        {nlohmann::json::array({text("a"), image, text("b")}), "a\nb"},
        {nlohmann::json::array({text(""), text("x")}), "\nx"},
        {nlohmann::json::array({text("x"), text("")}), "x\n"},
        {nlohmann::json::array({image}), ""},
        {"plain", "plain"},
    };
    for (int pass = 0; pass < 2; ++pass) {
        for (const auto& [system, system_text] : contents) {
            for (const auto& [user, user_text] : contents) {
                const nlohmann::json body = {{"model", "ds-v4.1-flash-1017"},
                                             {"messages",
                                              {{{"role", "system"}, {"content", system}},
                                               {{"role", "system"}, {"content", "second system"}},
                                               {{"role", "user"}, {"content", user}},
                                               {{"role", "assistant"}, {"content", "not in the head"}}}}};
                routing::ConversationView view;
                view.messages = {{"system", system_text}, {"system", "second system"}, {"user", user_text}};
                EXPECT_EQ(admitted(body.dump()).head_hash, routing::conversationHeadKey(view))
                    << system.dump() << " / " << user.dump();
            }
        }
    }
}

// Window boundary with the real count: exactly the window admits, one more refuses.
void boundary(AdmitTest* self, AdmissionLimits& limits, const std::string& body, std::uint64_t prompt,
              std::uint64_t images, std::uint64_t budget, Admitter& admitter) {
    limits.window_tokens = prompt + images * limits.image_reserve_tokens + budget;
    Verdict fits = admitter.admit(body, Endpoint::chat_completions, limits);
    ASSERT_TRUE(std::holds_alternative<Admitted>(fits)) << std::get<Refused>(fits).message;
    EXPECT_EQ(std::get<Admitted>(fits).prompt_tokens, prompt);
    EXPECT_TRUE(std::get<Admitted>(fits).counted);
    EXPECT_EQ(std::get<Admitted>(fits).images, images);
    limits.window_tokens -= 1;
    Verdict over = admitter.admit(body, Endpoint::chat_completions, limits);
    ASSERT_TRUE(std::holds_alternative<Refused>(over));
    const Refused& r = std::get<Refused>(over);
    EXPECT_EQ(r.http_status, 400u);
    EXPECT_EQ(r.code, "context_length_exceeded");
    EXPECT_EQ(r.param, "messages");
    std::string expected = "This model's maximum context length is " + std::to_string(limits.window_tokens) +
                           " tokens. However, you requested " + std::to_string(limits.window_tokens + 1) + " tokens (" +
                           std::to_string(prompt) + " in the messages, " + std::to_string(images * 1024) +
                           " for images, " + std::to_string(budget) +
                           " in the completion). Please reduce the length of the messages or completion.";
    if (images > 0) expected += " Each of the " + std::to_string(images) + " images is reserved 1024 tokens.";
    EXPECT_EQ(r.message, expected);
    (void)self;
}

TEST_F(AdmitTest, WindowBoundaryDefaultBudgetNoImages) {
    std::string text;
    for (int i = 0; i < 3000; ++i) text += "word" + std::to_string(i * 7919 % 1000) + " 世界 ";
    const std::string body = chat(text);
    const std::uint64_t prompt = exactTokens(body);
    EXPECT_LT(prompt, text.size());
    boundary(this, limits_, body, prompt, 0, 32768, admitter_);
}

TEST_F(AdmitTest, WindowBoundaryExplicitBudgetWithImages) {
    const std::string body =
        chat("Describe these pictures in detail, please. Ünïcödé 🙂", 5, R"("max_tokens":32767)");
    const std::uint64_t prompt = exactTokens(body);
    boundary(this, limits_, body, prompt, 5, 32767, admitter_);
}

TEST_F(AdmitTest, IssueExampleWindowMessage) {
    // 1,015,808 input + 32,768 output is exactly 1,048,576.
    limits_.window_tokens = 1048576;
    const std::string body = chat("x", 0, R"("max_tokens":32767)");
    const std::uint64_t prompt = exactTokens(body);
    limits_.window_tokens = prompt + 32767;
    EXPECT_TRUE(std::holds_alternative<Admitted>(admit(body)));
}

TEST_F(AdmitTest, TooManyImages) {
    limits_.max_images = 640;
    const Refused r = refused(chat("a", 641));
    EXPECT_EQ(r.code, "too_many_images");
    EXPECT_EQ(r.message, "641 images in this request (history included); the limit is 640.");
    EXPECT_TRUE(std::holds_alternative<Admitted>(admit(chat("a", 640))));
}

TEST_F(AdmitTest, ImagesCountedAcrossHistory) {
    limits_.max_images = 2;
    const std::string body =
        R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}},{"type":"input_image","image_url":"b"}]},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"c"}}]}]})";
    EXPECT_EQ(refused(body).message, "3 images in this request (history included); the limit is 2.");
}

TEST_F(AdmitTest, RulesInOrder) {
    // Shape before model: a wrong model in a malformed body is a 400.
    EXPECT_EQ(refused(R"({"model":"nope","messages":[{"role":5,"content":"x"}]})").http_status, 400u);
    // Model before images.
    limits_.max_images = 0;
    const Refused model = refused(
        R"({"model":"gpt-4","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}}]}]})");
    EXPECT_EQ(model.http_status, 404u);
    EXPECT_EQ(model.code, "model_not_found");
    // Images before the output budget.
    EXPECT_EQ(
        refused(
            R"({"model":"ds-v4.1-flash-1017","max_tokens":0,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}}]}]})")
            .code,
        "too_many_images");
    limits_.max_images = 640;
    // Budget before window.
    limits_.window_tokens = 10;
    EXPECT_EQ(refused(chat("hello", 0, R"("max_tokens":40000)")).param, "max_tokens");
    EXPECT_EQ(refused(chat("hello", 0, R"("max_tokens":10)")).code, "context_length_exceeded");
    // Size first of all.
    limits_.max_body_bytes = 10;
    const Refused size = refused("{not json at all}");
    EXPECT_EQ(size.http_status, 413u);
    EXPECT_EQ(size.code, "request_too_large");
}

TEST_F(AdmitTest, AliasAccepted) {
    limits_.model_aliases = {"deepseek"};
    EXPECT_TRUE(
        std::holds_alternative<Admitted>(admit(R"({"model":"deepseek","messages":[{"role":"user","content":"x"}]})")));
}

TEST_F(AdmitTest, TokenizerUnavailableIs503WhenCountingIsNeeded) {
    Admitter blind(nullptr, test::referenceChatTemplate());
    EXPECT_FALSE(blind.canCount());
    AdmissionLimits limits;
    const Verdict small = blind.admit(chat("hi"), Endpoint::chat_completions, limits);
    ASSERT_TRUE(std::holds_alternative<Admitted>(small));
    EXPECT_FALSE(std::get<Admitted>(small).counted);  // the byte bound proves it fits; nothing to verify
    limits.window_tokens = 32768 + 5;
    const Verdict v = blind.admit(chat("a longer prompt than five bytes"), Endpoint::chat_completions, limits);
    ASSERT_TRUE(std::holds_alternative<Refused>(v));
    EXPECT_EQ(std::get<Refused>(v).http_status, 503u);
    EXPECT_EQ(std::get<Refused>(v).code, "tokenizer_unavailable");
}

TEST_F(AdmitTest, ChatWithoutATemplateIs503AndCompletionsStillCount) {
    Admitter no_template(test::referenceTokenizer(), nullptr);
    const Verdict chat_verdict = no_template.admit(chat("hi"), Endpoint::chat_completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Refused>(chat_verdict));
    EXPECT_EQ(std::get<Refused>(chat_verdict).code, "tokenizer_unavailable");
    EXPECT_NE(std::get<Refused>(chat_verdict).message.find("chat template"), std::string::npos);
    const Verdict completion =
        no_template.admit(R"({"model":"ds-v4.1-flash-1017","prompt":"Hello world"})", Endpoint::completions, limits_);
    ASSERT_TRUE(std::holds_alternative<Admitted>(completion));
    EXPECT_EQ(std::get<Admitted>(completion).prompt_tokens, 3u);
}

TEST_F(AdmitTest, CompletionsPromptForms) {
    const auto tokens = [&](const std::string& prompt) {
        AdmissionLimits tight = limits_;
        tight.window_tokens = 32768;  // zero room: always counts, then refuses with the count
        const Verdict v =
            admitter_.admit(R"({"model":"ds-v4.1-flash-1017","prompt":)" + prompt + "}", Endpoint::completions, tight);
        const Refused& r = std::get<Refused>(v);
        EXPECT_EQ(r.param, "prompt");
        return std::stoull(r.message.substr(r.message.find('(') + 1));
    };
    EXPECT_EQ(tokens(R"("Hello world")"), 3u);                            // BOS + "Hello" + " world"
    EXPECT_EQ(tokens(R"(["Hello world", "Hello world and more"])"), 5u);  // the longest sequence
    EXPECT_EQ(tokens("[1,2,3,4]"), 4u);
    EXPECT_EQ(tokens("[[1,2],[3,4,5,6,7,8]]"), 6u);
    const Admitted a =
        admitted(R"({"model":"ds-v4.1-flash-1017","prompt":"hi","max_tokens":16})", Endpoint::completions);
    EXPECT_EQ(a.output_budget, 16u);
    for (const char* bad :
         {R"([])", R"([1,"a"])", R"([[1],[]])", R"([-1])", R"([1.5])", R"(5)", R"(null)", R"([null])", R"({"a":1})"}) {
        const Refused r =
            refused(std::string(R"({"model":"ds-v4.1-flash-1017","prompt":)") + bad + "}", Endpoint::completions);
        EXPECT_EQ(r.http_status, 400u) << bad;
        EXPECT_EQ(r.param.rfind("prompt", 0), 0u) << bad << ": " << r.param;
    }
    EXPECT_EQ(refused(R"({"model":"ds-v4.1-flash-1017"})", Endpoint::completions).param, "prompt");
}

TEST_F(AdmitTest, NextRequestAfterRefusalIsServed) {
    (void)refused("{\"model\":");
    (void)admitted(chat("hello again"));
}

// One admitter keeps the last request's message list for the next (no
// allocation per request): each request still reads as it does to an
// admitter that never saw another, whatever came before it.
TEST_F(AdmitTest, EachRequestReadsAsOnAFreshAdmitter) {
    auto conversation = [](int turns, const std::string& topic) {
        nlohmann::json messages = nlohmann::json::array();
        messages.push_back({{"role", "system"}, {"content", "You answer about " + topic + "."}});
        for (int i = 0; i < turns; ++i) {
            messages.push_back({{"role", "user"}, {"content", topic + " question " + std::to_string(i)}});
            messages.push_back({{"role", "assistant"}, {"content", "answer " + std::to_string(i)}, {"name", "bot"}});
        }
        messages.push_back(
            {{"role", "user"}, {"content", nlohmann::json::array({{{"type", "text"}, {"text", "last"}}})}});
        return nlohmann::json({{"model", "ds-v4.1-flash-1017"}, {"max_tokens", 8}, {"messages", messages}}).dump();
    };
    const std::string bodies[] = {conversation(50, "tides"), conversation(1, "bees"),   chat("one"),
                                  conversation(3, "rust"),   conversation(40, "ships"), conversation(0, "x")};
    for (int pass = 0; pass < 2; ++pass) {
        for (const std::string& body : bodies) {
            const Admitted here = admitted(body);
            Admitter fresh(test::referenceTokenizer(), test::referenceChatTemplate());
            const Verdict there = fresh.admit(body, Endpoint::chat_completions, limits_);
            ASSERT_TRUE(std::holds_alternative<Admitted>(there));
            EXPECT_EQ(here.prompt_tokens, std::get<Admitted>(there).prompt_tokens) << body.substr(0, 80);
            EXPECT_EQ(here.head_hash, std::get<Admitted>(there).head_hash) << body.substr(0, 80);
            EXPECT_EQ(admitter_.prompt(), fresh.prompt());
        }
    }
}

}  // namespace
}  // namespace dpgate::admission
