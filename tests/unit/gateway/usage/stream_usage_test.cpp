#include "gateway/usage/stream_usage.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <optional>

#include <string>
#include <vector>

namespace dpgate::gateway {
namespace {

const std::string kChunk1 =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"ds-v4.1-flash-1017\","
    "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\n";
const std::string kChunk2 =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"ds-v4.1-flash-1017\","
    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The \\\"usage\\\": {x} field\"}}],\"usage\":null}\n\n";
const std::string kChunkStop =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"ds-v4.1-flash-1017\","
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n";
const std::string kUsageChunk =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"ds-v4.1-flash-1017\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":1200,\"total_tokens\":1242,\"completion_tokens\":42,"
    "\"prompt_tokens_details\":{\"cached_tokens\":1024}}}\n\n";
const std::string kDone = "data: [DONE]\n\n";

const Usage kExpected{.prompt_tokens = 1200, .completion_tokens = 42, .cached_prompt_tokens = 1024};

std::string stream() { return kChunk1 + kChunk2 + kChunkStop + kUsageChunk + kDone; }
std::string streamWithoutUsage() { return kChunk1 + kChunk2 + kChunkStop + kDone; }

std::string toCrlf(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '\n') out += '\r';
        out += c;
    }
    return out;
}

TEST(ParseUsageJson, NonStreamBody) {
    const std::string body =
        "{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
        "\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,"
        "\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":8}}}";
    EXPECT_EQ(parseUsageJson(body), (Usage{10, 2, 8}));
}

TEST(ParseUsageJson, MissingDetailsMeansNoCachedTokens) {
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":5,"completion_tokens":1}})"), (Usage{5, 1, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":5,"prompt_tokens_details":null}})"), (Usage{5, 0, 0}));
}

TEST(ParseUsageJson, AbsentOrMalformedGivesNothingAndNeverThrows) {
    for (const char* text : {"", "{", "null", "[]", "{\"usage\":null}", "{\"usage\":{}}", "{\"usage\":[1,2]}",
                             "{\"usage\":{\"prompt_tokens\":-1}}", "{\"usage\":{\"prompt_tokens\":1.5}}",
                             "{\"usage\":{\"prompt_tokens\":\"10\"}}", "{\"usage\":{\"prompt_tokens\":1}",
                             "{\"usage\":{\"prompt_tokens\":99999999999999999999999}}", "\xff\xfe{}"}) {
        EXPECT_FALSE(parseUsageJson(text).has_value()) << text;
    }
}

TEST(IsUsageOnlyChunk, OnlyEmptyChoicesWithUsage) {
    EXPECT_TRUE(isUsageOnlyChunk(R"({"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}})"));
    EXPECT_FALSE(isUsageOnlyChunk(R"({"choices":[{"index":0}],"usage":{"prompt_tokens":1}})"));
    EXPECT_FALSE(isUsageOnlyChunk(R"({"choices":[],"usage":null})"));
    EXPECT_FALSE(isUsageOnlyChunk(R"({"usage":{"prompt_tokens":1}})"));
    EXPECT_FALSE(isUsageOnlyChunk(R"({"choices":[],"usage":{"prompt_tokens":1})"));  // truncated
}

TEST(SseEventData, JoinsDataLinesAndStripsOneSpace) {
    EXPECT_EQ(sseEventData("data: a\ndata:b\ndata:  c\n\n"), "a\nb\n c");
    EXPECT_EQ(sseEventData("event: x\r\nid: 1\r\n: comment\r\ndata: {}\r\n\r\n"), "{}");
    EXPECT_EQ(sseEventData("database: no\ndata\n\n"), "");
    EXPECT_EQ(sseEventData("data: a\rdata: b\r\r"), "a\nb");
}

TEST(SseUsageParser, FindsUsageInWholeStream) {
    SseUsageParser p;
    p.observe(stream());
    p.finish();
    EXPECT_EQ(p.usage(), kExpected);
    EXPECT_TRUE(p.sawUsageOnlyChunk());
    EXPECT_TRUE(p.sawDone());
    EXPECT_EQ(p.heldBytes(), 0u);
}

TEST(SseUsageParser, NoUsageInStream) {
    SseUsageParser p;
    std::string forward;
    p.filter(streamWithoutUsage(), forward);
    p.finish(&forward);
    EXPECT_FALSE(p.usage().has_value());
    EXPECT_FALSE(p.sawUsageOnlyChunk());
    EXPECT_EQ(forward, streamWithoutUsage());
}

// Every split point, in both modes and both line-ending styles: the relay's
// 64 KiB reads cut events anywhere.
void checkEverySplit(const std::string& input, const std::string& expected_forward) {
    for (size_t cut = 0; cut <= input.size(); ++cut) {
        SseUsageParser observer;
        observer.observe(std::string_view(input).substr(0, cut));
        observer.observe(std::string_view(input).substr(cut));
        observer.finish();
        ASSERT_EQ(observer.usage(), kExpected) << "observe, cut at " << cut;

        SseUsageParser filter;
        std::string forward;
        filter.filter(std::string_view(input).substr(0, cut), forward);
        filter.filter(std::string_view(input).substr(cut), forward);
        filter.finish(&forward);
        ASSERT_EQ(filter.usage(), kExpected) << "filter, cut at " << cut;
        ASSERT_EQ(forward, expected_forward) << "filter, cut at " << cut;
        ASSERT_EQ(filter.droppedEvents(), 1u);
    }
}

TEST(SseUsageParser, EverySplitPointLf) { checkEverySplit(stream(), streamWithoutUsage()); }

TEST(SseUsageParser, EverySplitPointCrlf) { checkEverySplit(toCrlf(stream()), toCrlf(streamWithoutUsage())); }

TEST(SseUsageParser, ByteAtATimeCr) {
    std::string cr_stream = stream();
    for (char& c : cr_stream)
        if (c == '\n') c = '\r';
    std::string expected = streamWithoutUsage();
    for (char& c : expected)
        if (c == '\n') c = '\r';
    SseUsageParser p;
    std::string forward;
    for (char c : cr_stream) p.filter(std::string_view(&c, 1), forward);
    p.finish(&forward);
    EXPECT_EQ(p.usage(), kExpected);
    EXPECT_EQ(forward, expected);
}

TEST(SseUsageParser, MultiLineDataIsJoined) {
    const std::string multi =
        "data: {\"choices\":[],\n"
        "data: \"usage\":\n"
        "data: {\"prompt_tokens\":7,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n";
    SseUsageParser p;
    std::string forward;
    p.filter(kChunk1 + multi + kDone, forward);
    EXPECT_EQ(p.usage(), (Usage{7, 3, 4}));
    EXPECT_EQ(forward, kChunk1 + kDone);
}

TEST(SseUsageParser, NullUsageShortcutDoesNotHideARealUsage) {
    // The fast path skips events whose every "usage" is null; spacing and a
    // nested null usage must not make it skip a real one.
    const std::string spaced =
        "data: {\"choices\" : [ ], \"usage\" :\t{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n";
    const std::string nested =
        "data: {\"meta\":{\"usage\":null},\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n";
    SseUsageParser p;
    std::string forward;
    p.filter(spaced, forward);
    EXPECT_EQ(p.usage(), (Usage{3, 1, 0}));
    p.filter(nested, forward);
    EXPECT_EQ(p.usage(), (Usage{4, 2, 0}));
    EXPECT_EQ(forward, "");
    EXPECT_EQ(p.droppedEvents(), 2u);
}

TEST(SseUsageParser, KeysAndLineEndsAreFoundAtEveryOffset) {
    // The searches for "usage", "[DONE]" and the line ends go sixteen bytes
    // at a time: each is moved across every offset of two such blocks, with
    // near misses ("usag", a quote before "u" elsewhere) in front.
    for (size_t pad = 0; pad < 40; ++pad) {
        const std::string filler = "\\\"u\\\"usag" + std::string(pad, 'x');  // \"u\"usag (escaped quotes)
        const std::string real = "data: {\"id\":\"" + filler +
                                 "\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\n";
        const std::string null_usage = "data: {\"id\":\"" + filler + "\",\"choices\":[],\"usage\":null}\n\n";
        const std::string done = "data: " + std::string(pad, ' ') + "[DONE]\r\n\r\n";
        SseUsageParser p;
        p.observe(null_usage);
        EXPECT_FALSE(p.usage()) << pad;
        p.observe(real);
        EXPECT_EQ(p.usage(), (Usage{7, 2, 0})) << pad;
        EXPECT_TRUE(p.sawUsageOnlyChunk()) << pad;
        EXPECT_EQ(p.sawDone(), false) << pad;
        p.observe(done);
        EXPECT_EQ(p.sawDone(), pad == 0) << pad;  // the data is "[DONE]" only without the padding
        EXPECT_EQ(sseEventData("data: " + filler + "\r\ndata:" + filler + "\n"), filler + "\n" + filler) << pad;
    }
}

TEST(SseUsageParser, UsageOnEveryChunkIsNotDropped) {
    // continuous_usage_stats: usage rides on content chunks; only the
    // empty-choices chunk is the extra one.
    const std::string chunk =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],"
        "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n";
    SseUsageParser p;
    std::string forward;
    p.filter(chunk, forward);
    EXPECT_EQ(forward, chunk);
    EXPECT_EQ(p.usage(), (Usage{5, 1, 0}));
    EXPECT_FALSE(p.sawUsageOnlyChunk());
}

TEST(SseUsageParser, MalformedEventsPassThroughUntouched) {
    const std::string junk =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1\n\n"  // truncated JSON
        "data: {\"usage\": {\"prompt_tokens\": \"x\"}, \"choices\": []}\n\n"
        "data: \xff\xfe\n\n"
        "\n\n\n"
        ": keepalive\n\n";
    SseUsageParser p;
    std::string forward;
    p.filter(junk, forward);
    p.finish(&forward);
    EXPECT_EQ(forward, junk);
    EXPECT_FALSE(p.usage().has_value());
}

TEST(SseUsageParser, UnterminatedTailIsForwardedAndCounted) {
    std::string tail = kUsageChunk.substr(0, kUsageChunk.size() - 2);  // no blank line
    SseUsageParser p;
    std::string forward;
    p.filter(kChunk1 + tail, forward);
    EXPECT_EQ(forward, kChunk1);  // held: it may still be completed
    p.finish(&forward);
    EXPECT_EQ(forward, kChunk1 + tail);
    EXPECT_EQ(p.usage(), kExpected);
}

TEST(SseUsageParser, OversizedEventPassesThroughUnparsedWithBoundedMemory) {
    constexpr size_t kCap = 1024;
    // A usage-only event padded past the cap: forwarded, not parsed.
    std::string big = "data: {\"choices\":[],\"pad\":\"" + std::string(5000, 'x') +
                      "\",\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":9}}\n\n";
    SseUsageParser p(kCap);
    std::string forward;
    size_t max_held = 0;
    const std::string input = big + kUsageChunk + kDone;
    for (size_t i = 0; i < input.size(); i += 100) {
        p.filter(std::string_view(input).substr(i, 100), forward);
        max_held = std::max(max_held, p.heldBytes());
    }
    p.finish(&forward);
    EXPECT_LE(max_held, kCap + 1);
    EXPECT_EQ(forward, big + kDone);  // the oversized one kept, the normal usage chunk dropped
    EXPECT_EQ(p.usage(), kExpected);
}

// The usage reader reads as a DOM parse does, where a hand grammar may take
// shortcuts: the last of repeated keys at every level, counts only from
// non-negative integers that fit in 64 bits.
TEST(ParseUsageJson, CountsOnlyNonNegativeIntegersThatFit) {
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":18446744073709551616,"completion_tokens":2}})"),
              (Usage{0, 2, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":-9223372036854775809,"completion_tokens":2}})"),
              (Usage{0, 2, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":-5,"completion_tokens":2}})"), (Usage{0, 2, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":12.0,"completion_tokens":3}})"), (Usage{0, 3, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":1e2,"completion_tokens":3}})"), (Usage{0, 3, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":-0,"completion_tokens":3}})"), (Usage{0, 3, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":9223372036854775808}})"),
              (Usage{9223372036854775808u, 0, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2.5}}})"),
              (Usage{3, 0, 0}));
    // Not a number at all: valid JSON, no count.
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":true,"completion_tokens":{"n":1}}})"), std::nullopt);
}

TEST(ParseUsageJson, MalformedNumbersInTheUsageObjectCountNothing) {
    for (const char* text :
         {R"({"usage":{"prompt_tokens":-,"completion_tokens":1}})", R"({"usage":{"prompt_tokens":1x}})",
          R"({"usage":{"prompt_tokens":1,"completion_tokens":--1}})", R"({"usage":{"prompt_tokens":1,"x":.5}})",
          // A JSON number simdjson cannot hold as a double: refused, where a
          // DOM parse reads infinity. No backend sends one in usage.
          R"({"usage":{"prompt_tokens":1,"x":1e400}})"}) {
        EXPECT_EQ(parseUsageJson(text), std::nullopt) << text;
    }
}

TEST(ParseUsageJson, UsageNestedInChoicesDoesNotCount) {
    EXPECT_EQ(parseUsageJson(R"({"choices":[{"index":0,"usage":{"prompt_tokens":7,"completion_tokens":1}}]})"),
              std::nullopt);
    EXPECT_EQ(parseUsageJson(R"({"meta":{"usage":{"prompt_tokens":7}},"usage":{"completion_tokens":1}})"),
              (Usage{0, 1, 0}));
    EXPECT_FALSE(isUsageOnlyChunk(R"({"choices":[],"x":{"usage":{"prompt_tokens":1}}})"));
}

TEST(ParseUsageJson, RepeatedKeysCountTheirLastValue) {
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}})"), (Usage{2, 0, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":1},"usage":null})"), std::nullopt);
    EXPECT_EQ(parseUsageJson(R"({"usage":null,"usage":{"completion_tokens":4}})"), (Usage{0, 4, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":1,"prompt_tokens":"2"}})"), std::nullopt);
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":5},)"
                             R"("prompt_tokens_details":null}})"),
              (Usage{9, 0, 0}));
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":5,)"
                             R"("cached_tokens":6}}})"),
              (Usage{9, 0, 6}));
    EXPECT_TRUE(isUsageOnlyChunk(R"({"choices":[{"index":0}],"choices":[],"usage":{"prompt_tokens":1}})"));
    EXPECT_FALSE(isUsageOnlyChunk(R"({"choices":[],"choices":[{"index":0}],"usage":{"prompt_tokens":1}})"));
}

// An answer's usage is read from its end: the members after the last
// top-level `usage` are passed over, the text before it is not read.
TEST(ParseUsageJson, ReadFromTheEndPastTheMembersAfterUsage) {
    // vLLM writes members after usage.
    EXPECT_EQ(parseUsageJson(R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2},)"
                             R"("prompt_logprobs":null,"kv_transfer_params":null} )"),
              (Usage{4, 2, 0}));
    // A usage nested in a later member is not the answer's.
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":3},"meta":{"usage":{"prompt_tokens":7}},"n":[1,{"a":[]}]})"),
              (Usage{3, 0, 0}));
    // Brackets and escaped quotes inside later strings are text.
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt_tokens":3},"note":"}] \"usage\":{\"prompt_tokens\":9} \\",)"
                             R"("n":-1.5E+3,"t":true})"),
              (Usage{3, 0, 0}));
    EXPECT_EQ(parseUsageJson("{\n\t\"usage\" :\r\n {\"completion_tokens\": 5}\n}\n"), (Usage{0, 5, 0}));
    // The text before the usage member is the backend's, relayed as it came.
    EXPECT_EQ(parseUsageJson(R"({"choices":[tru],"usage":{"prompt_tokens":3}})"), (Usage{3, 0, 0}));
}

TEST(ParseUsageJson, AnEndTheWalkCannotTakeApartIsReadWhole) {
    // No usage member down to the opening brace: none, as the whole read says.
    EXPECT_EQ(parseUsageJson(R"({"choices":[{"usage":{"prompt_tokens":7}}],"id":"x"})"), std::nullopt);
    EXPECT_EQ(parseUsageJson("{}"), std::nullopt);
    // Something after the usage member the walk does not know: the whole read decides.
    const char* odd = R"({"usage":{"prompt_tokens":3},"x":@})";
    EXPECT_EQ(parseUsageJson(odd), readWholeUsage(odd));
    // Cut answers, unclosed strings, a lone closing brace: nothing, and nothing read out of bounds.
    for (const char* text : {"}", "\"}", "\"usage\":{}}", R"({"usage":{"prompt_tokens":3},"x":"})", R"(:1})",
                             R"({"usage":{"prompt_tokens":3}},)", R"({"usage":{"prompt_tokens":3})"}) {
        EXPECT_EQ(parseUsageJson(text), std::nullopt) << text;
    }
}

// The relay keeps only the last 64 KiB of an answer over 1 MiB: the usage
// is read from that end, and a window that starts inside a string or a
// container gives none rather than a guess.
TEST(ParseUsageJsonEnd, ReadsTheUsageFromTheAnswersEndAlone) {
    const std::string usage = R"("usage":{"prompt_tokens":3,"completion_tokens":4})";
    const std::string answer = R"({"choices":[{"message":{"content":")" + std::string(200000, 'x') +
                               R"( "q" \"},"logprobs":{"content":[)" + std::string(100, '1') + "]}}]," + usage +
                               R"(,"prompt_logprobs":null})";
    const std::string_view whole(answer);
    EXPECT_EQ(parseUsageJsonEnd(whole.substr(whole.size() - 65536)), (Usage{3, 4, 0}));
    EXPECT_EQ(parseUsageJsonEnd(whole), (Usage{3, 4, 0}));
    // The window starts inside the usage member, or just at its key: none.
    const size_t at = answer.find(R"("usage")");
    EXPECT_EQ(parseUsageJsonEnd(whole.substr(at + 10)), std::nullopt);
    EXPECT_EQ(parseUsageJsonEnd(whole.substr(at)), std::nullopt);
    // A nested usage whose object starts before the window is not taken for the answer's.
    const std::string nested = R"({"meta":{"usage":{"prompt_tokens":9},"x":1},"y":2})";
    EXPECT_EQ(parseUsageJsonEnd(std::string_view(nested).substr(nested.find(R"("usage")"))), std::nullopt);
    // Inside a string, quotes are escaped: the window's text cannot pass for members.
    const std::string in_string = R"({"choices":[{"text":"a","usage":{"prompt_tokens":9}}"}],"id":"x"})";
    for (size_t from = 0; from < in_string.size(); ++from)
        EXPECT_EQ(parseUsageJsonEnd(std::string_view(in_string).substr(from)), std::nullopt) << from;
}

// The usage object in the plain shape is read without simdjson; every
// other spelling goes to simdjson. Either way, what the whole read (On
// Demand throughout) says: from an answer's end, and in an SSE event.
void expectReadAsTheWholeReadDoes(const char* usage) {
    const std::string answer = std::string(R"({"id":"x","usage":)") + usage + R"(,"prompt_logprobs":null})";
    EXPECT_EQ(parseUsageJson(answer), readWholeUsage(answer)) << answer;
    const std::string chunk = std::string(R"({"id":"x","choices":[],"usage":)") + usage + R"(,"n":1})";
    SseUsageParser parser;
    std::string forward;
    parser.filter("data: " + chunk + "\n\n", forward);
    EXPECT_EQ(parser.usage(), readWholeUsage(chunk)) << chunk;
    EXPECT_EQ(isUsageOnlyChunk(chunk), readWholeUsage(chunk).has_value()) << chunk;
}

TEST(ParseUsageJson, PlainAndOtherUsageObjectsReadAsTheWholeReadDoes) {
    for (
        const char* usage :
        {R"({"prompt_tokens":23,"total_tokens":39,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":0}})",
         R"( { "prompt_tokens" : 0 , "completion_tokens":9999999999999999999 } )",
         R"({"prompt_tokens":99999999999999999999})",
         R"({"prompt_tokens":18446744073709551615})",
         R"({"prompt_tokens":null,"completion_tokens":2})",
         R"({"prompt_tokens":null})",
         R"({"prompt_tokens":3,"prompt_tokens_details":null})",
         R"({"prompt_tokens":3,"prompt_tokens_details":7})",
         R"({"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2,"audio_tokens":null},"prompt_tokens_details":{}})",
         R"({"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens":4})",
         R"({"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":{"x":1}}})",
         R"({"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":[]}})",
         R"({"prompt_tokens":3,"prompt_tokens_details":{"prompt_tokens_details":{"cached_tokens":1}}})",
         R"({"prompt_tokens":01})",
         R"({"prompt_tokens":-0})",
         R"({"prompt_tokens":1.0})",
         R"({"prompt_tokens":1e2})",
         R"({"prompt_tokens":1,})",
         R"({"prompt_tokens":1 2})",
         R"({"prompt_tokens":nul})",
         R"({"prompt_tokens":nullx})",
         R"({"prompt_tokens":"1"})",
         R"({"prompt\u005ftokens":5})",
         R"({"prompt_tokens":5,"é":1})",
         R"({})",
         R"({"a"})",
         "{\"prompt_tokens\":5,\"x\":\"\t\"}",
         R"({"prompt_tokens":5}})"})
        expectReadAsTheWholeReadDoes(usage);
}

// The five keys backends write are matched whole: keys that begin like them,
// or sit where another is read, are read as the whole read reads them.
TEST(ParseUsageJson, KeysLikeTheFiveReadAsTheWholeReadDoes) {
    for (const char* usage :
         {R"({"prompt_tokensX":5,"completion_tokens":1})",
          R"({"prompt_tokens_detailsX":{"cached_tokens":1},"prompt_tokens":5})",
          R"({"prompt_tokens_detail":{"cached_tokens":1},"prompt_tokens":5})",
          R"({"prompt_tokens":5,"cached_tokens":4})", R"({"prompt_tokens":5,"total_tokens":{"a":1}})",
          R"({"prompt_tokens":5,"total_tokens_":1,"completion_":2,"p":3,"c":4,"t":5})",
          R"({"completion_tokens":2,"prompt_tokens_details":{"completion_tokens":7,"cached_tokens":1}})",
          R"({"completion_tokens\":2})", R"({"prompt_tokens":5,"{}[]":1})", R"({"prompt_tokens":5,"":1})"})
        expectReadAsTheWholeReadDoes(usage);
}

TEST(ParseUsageJson, TheEndReadAgreesWithTheWholeReadOnValidAnswers) {
    for (const char* text :
         {R"({"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}})",
          R"({"usage":{"prompt_tokens":1},"usage":null})", R"({"usage":null,"usage":{"completion_tokens":4}})",
          R"({"us\u0061ge":{"prompt_tokens":1}})",
          R"({"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":5}},"x":[{"}":"]"}]})",
          R"({"a":"\\","usage":{"prompt_tokens":2,"completion_tokens":1}})", R"({"usage":[1,2]})", R"({"usage":{}})"}) {
        EXPECT_EQ(parseUsageJson(text), readWholeUsage(text)) << text;
    }
}

TEST(ParseUsageJson, NullOrNonObjectUsageGivesNothing) {
    for (const char* text : {R"({"usage":null})", R"({"usage":0})", R"({"usage":"{}"})", R"({"usage":[]})",
                             R"({"choices":[],"usage":null})", R"({"choices":[],"usage":{}})"}) {
        EXPECT_EQ(parseUsageJson(text), std::nullopt) << text;
        EXPECT_FALSE(isUsageOnlyChunk(text)) << text;
    }
    EXPECT_FALSE(isUsageOnlyChunk(R"({"choices":{},"usage":{"prompt_tokens":1}})"));
    EXPECT_FALSE(isUsageOnlyChunk(R"({"choices":null,"usage":{"prompt_tokens":1}})"));
}

TEST(ParseUsageJson, KeysInsideUsageAreReadDecoded) {
    // A DOM parse decodes keys; the top-level "usage" itself must be spelled
    // plainly, as the stream's "usage":null check looks for those bytes.
    EXPECT_EQ(parseUsageJson(R"({"usage":{"prompt\u005ftokens":5}})"), (Usage{5, 0, 0}));
    EXPECT_EQ(parseUsageJson(R"({"us\u0061ge":{"prompt_tokens":5}})"), std::nullopt);
}

TEST(ParseUsageJson, WholeDocumentMustBeOneObject) {
    const std::string usage = R"({"usage":{"prompt_tokens":5,"completion_tokens":1}})";
    EXPECT_EQ(parseUsageJson(usage + " \r\n\t"), (Usage{5, 1, 0}));
    EXPECT_EQ(parseUsageJson(" " + usage), (Usage{5, 1, 0}));
    for (const std::string& text :
         {usage + "{}", usage + " x", usage + "}", "[" + usage + "]", usage.substr(0, usage.size() - 1)}) {
        EXPECT_EQ(parseUsageJson(text), std::nullopt) << text;
        EXPECT_EQ(readWholeUsage(text), std::nullopt) << text;
    }
    // The text before the usage member is not read from the end; the whole
    // read finds the object cut.
    const std::string cut_before = R"({"choices":[,)" + usage.substr(1);
    EXPECT_EQ(parseUsageJson(cut_before), (Usage{5, 1, 0}));
    EXPECT_EQ(readWholeUsage(cut_before), std::nullopt);
}

TEST(ParseUsageJson, TextBeforeUsageIsNotCheckedFromTheEnd) {
    // The whole read (simdjson) checks UTF-8 and unescaped control
    // characters over the whole document: an answer with either counts
    // nothing. Read from the end, the usage the backend reported counts: the
    // answer's text is relayed as it came either way.
    for (const char* text : {"{\"choices\":[{\"text\":\"\xc3\x28\"}],\"usage\":{\"prompt_tokens\":5}}",
                             "{\"choices\":[{\"text\":\"a\x01\"}],\"usage\":{\"prompt_tokens\":5}}"}) {
        EXPECT_EQ(readWholeUsage(text), std::nullopt) << text;
        EXPECT_EQ(parseUsageJson(text), (Usage{5, 0, 0})) << text;
    }
    const char* valid = "{\"choices\":[{\"text\":\"\xc3\xa9\xf0\x9f\x99\x82\"}],\"usage\":{\"prompt_tokens\":5}}";
    EXPECT_EQ(readWholeUsage(valid), (Usage{5, 0, 0}));
    EXPECT_EQ(parseUsageJson(valid), (Usage{5, 0, 0}));
    // The usage object itself is checked either way.
    EXPECT_EQ(parseUsageJson("{\"usage\":{\"prompt_tokens\":5,\"x\":\"\xc3\x28\"}}"), std::nullopt);
}

TEST(ParseUsageJson, DeepNestingNeverCrashes) {
    const std::string deep_choices =
        R"({"choices":)" + std::string(100000, '[') + std::string(100000, ']') + R"(,"usage":{"prompt_tokens":5}})";
    // Skipped members are stepped over by counting brackets, not recursed into.
    EXPECT_EQ(parseUsageJson(deep_choices), (Usage{5, 0, 0}));
    EXPECT_EQ(readWholeUsage(deep_choices), (Usage{5, 0, 0}));
    // Nor are the members after usage recursed into, read from the end.
    const std::string deep_after =
        R"({"usage":{"prompt_tokens":5},"x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
    EXPECT_EQ(parseUsageJson(deep_after), (Usage{5, 0, 0}));
    std::string deep_usage = R"({"usage":{"prompt_tokens":5,"x":)";
    deep_usage += std::string(200, '[') + std::string(200, ']') + "}}";
    EXPECT_EQ(parseUsageJson(deep_usage), std::nullopt);  // past the usage object's depth limit
    EXPECT_EQ(parseUsageJson(std::string(100000, '{')), std::nullopt);
}

TEST(ParseUsageJson, DeepAndWideUsageAtEveryDepthNeverCrashes) {
    for (const size_t depth : {size_t(1000), size_t(100000), size_t(1000000)}) {
        const std::string deep = std::string(depth, '[') + std::string(depth, ']');
        const std::string in_usage = R"({"usage":{"prompt_tokens":5,"x":)" + deep + "}}";
        const std::string in_details = R"({"usage":{"prompt_tokens":5,"prompt_tokens_details":{"x":)" + deep + "}}}";
        bool implausible = false;
        const UsageCheck check{.max_tokens = 1000, .implausible = &implausible};
        // Past the usage object's depth limit: malformed, so no usage, and not implausible.
        EXPECT_EQ(parseUsageJson(in_usage, check), std::nullopt) << depth;
        EXPECT_EQ(parseUsageJson(in_details, check), std::nullopt) << depth;
        EXPECT_EQ(readWholeUsage(in_usage, check), std::nullopt) << depth;
        EXPECT_FALSE(implausible) << depth;
        SseUsageParser p(SseUsageParser::kDefaultMaxEventBytes * 4, 1000);
        std::string forward;
        const std::string event = "data: " + in_usage + "\n\n";
        p.filter(event, forward);
        p.finish(&forward);
        EXPECT_EQ(forward, event) << depth;
        EXPECT_FALSE(p.usage()) << depth;
    }
    std::string wide = R"({"usage":{)";
    for (int i = 0; i < 100000; ++i) wide += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
    wide += R"("prompt_tokens":5,"completion_tokens":6}})";
    EXPECT_EQ(parseUsageJson(wide), (Usage{5, 6, 0}));
    EXPECT_EQ(readWholeUsage(wide), (Usage{5, 6, 0}));
}

TEST(ParseUsageJson, ReaderReusedAcrossLargeAndSmallAnswers) {
    // One parser per thread: a large answer, then small and cut ones, read
    // as if each were the first.
    const std::string big = R"({"choices":[{"message":{"content":")" + std::string(1 << 20, 'x') +
                            R"("}}],"usage":{"prompt_tokens":3,"completion_tokens":4}})";
    const std::string small = R"({"usage":{"prompt_tokens":1,"completion_tokens":2}})";
    EXPECT_EQ(parseUsageJson(big), (Usage{3, 4, 0}));
    EXPECT_EQ(parseUsageJson(small), (Usage{1, 2, 0}));
    EXPECT_EQ(parseUsageJson(std::string_view(small).substr(0, small.size() - 1)), std::nullopt);
    EXPECT_EQ(parseUsageJson(big), (Usage{3, 4, 0}));
    // A view into a larger buffer: the reader must not read past its end.
    const std::string two = small + R"({"usage":{"prompt_tokens":9}})";
    EXPECT_EQ(parseUsageJson(std::string_view(two).substr(0, small.size())), (Usage{1, 2, 0}));
    // The same for the whole read, which copies the answer into its buffer.
    EXPECT_EQ(readWholeUsage(big), (Usage{3, 4, 0}));
    EXPECT_EQ(readWholeUsage(small), (Usage{1, 2, 0}));
    EXPECT_EQ(readWholeUsage(std::string_view(small).substr(0, small.size() - 1)), std::nullopt);
    EXPECT_EQ(readWholeUsage(big), (Usage{3, 4, 0}));
    EXPECT_EQ(readWholeUsage(std::string_view(two).substr(0, small.size())), (Usage{1, 2, 0}));
}

}  // namespace
}  // namespace dpgate::gateway

TEST(ParseUsageJson, OnlyTheTopLevelUsageCounts) {
    // The answer's own text talks about usage; nested objects carry one too.
    const std::string text =
        R"({"choices":[{"message":{"content":"\"usage\":{\"prompt_tokens\":99}","usage":{"prompt_tokens":7}}}],)"
        R"("usage" : {"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3}}})";
    auto usage = dpgate::gateway::parseUsageJson(text);
    ASSERT_TRUE(usage.has_value());
    EXPECT_EQ(usage->prompt_tokens, 5u);
    EXPECT_EQ(usage->completion_tokens, 2u);
    EXPECT_EQ(usage->cached_prompt_tokens, 3u);
    EXPECT_FALSE(dpgate::gateway::parseUsageJson(text.substr(0, text.size() - 1)).has_value());
}

TEST(ParseUsageJson, ReadsTheUsageObjectLikeADomParse) {
    using dpgate::gateway::parseUsageJson;
    using dpgate::gateway::Usage;
    // The answer's usage object is read without a DOM; every case here is
    // checked against nlohmann's reading of the same document.
    const char* cases[] = {
        R"({"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":8}}})",
        R"({"usage": { "prompt_tokens" : 10 , "completion_tokens" : 0 } })",
        R"({"usage":{"completion_tokens":3}})",
        R"({"usage":{"prompt_tokens":0,"prompt_tokens_details":{"audio_tokens":null,"cached_tokens":0}}})",
        R"({"usage":{"prompt_tokens":4,"prompt_tokens_details":{}}})",
        R"({"usage":{"prompt_tokens":4,"extra":[1,{"a":[true,false,null]},"x\"y\\u00e9"],"completion_tokens":1}})",
        R"({"usage":{"prompt_tokens":4,"completion_tokens":1e2}})",
        R"({"usage":{"prompt_tokens":4.0,"completion_tokens":-0}})",
        R"({"usage":{"prompt_tokens":18446744073709551615}})",
        R"({"usage":{"prompt_tokens":18446744073709551616}})",
        R"({"usage":{"prompt_tokens":7,"prompt_tokens_details":{"cached_tokens":"5"}}})",
        R"({"usage":{"prompt_tokens":7,"prompt_tokens_details":[{"cached_tokens":5}]}})",
        R"({"usage":{"prompt_tokens":1,"prompt_tokens":2}})",
    };
    auto reference = [](std::string_view text) -> std::optional<Usage> {
        auto doc = nlohmann::json::parse(text, nullptr, false);
        if (doc.is_discarded() || !doc.contains("usage") || !doc["usage"].is_object()) return std::nullopt;
        const auto& u = doc["usage"];
        auto count = [](const nlohmann::json& o, const char* key) -> std::optional<uint64_t> {
            if (!o.contains(key)) return std::nullopt;
            if (o[key].is_number_unsigned()) return o[key].get<uint64_t>();
            if (o[key].is_number_integer() && o[key].get<int64_t>() >= 0) return uint64_t(o[key].get<int64_t>());
            return std::nullopt;
        };
        auto prompt = count(u, "prompt_tokens");
        auto completion = count(u, "completion_tokens");
        if (!prompt && !completion) return std::nullopt;
        uint64_t cached = 0;
        if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
            cached = count(u["prompt_tokens_details"], "cached_tokens").value_or(0);
        return Usage{prompt.value_or(0), completion.value_or(0), cached};
    };
    for (const char* text : cases) EXPECT_EQ(parseUsageJson(text), reference(text)) << text;
    // Malformed usage objects are refused as a DOM parse refuses them.
    for (const char* text :
         {R"({"usage":{"prompt_tokens":5,}})", R"({"usage":{"prompt_tokens":05}})",
          R"({"usage":{"prompt_tokens":5 "completion_tokens":1}})", R"({"usage":{"prompt_tokens":tru}})",
          R"({"usage":{"prompt_tokens":1,"x":"\q"}})", "{\"usage\":{\"prompt_tokens\":1,\"x\":\"\x01\"}}",
          R"({"usage":{"prompt_tokens":1,"x":[1,]}})", R"({"usage":{"prompt_tokens":1.}})"}) {
        EXPECT_FALSE(parseUsageJson(text).has_value()) << text;
        EXPECT_FALSE(reference(text).has_value()) << text;
    }
}

namespace dpgate::gateway {
namespace {

// A usage key anywhere in a long answer is found, first or last, whatever
// the text around it (an earlier pre-check searched the last 256 bytes
// first, and this covered its split).
TEST(ParseUsageJson, UsageKeyFoundWhereverItSitsInALongAnswer) {
    for (size_t pad = 0; pad < 320; ++pad) {
        const std::string first =
            R"({"usage":{"prompt_tokens":3,"completion_tokens":1},"pad":")" + std::string(pad, 'x') + "\"}";
        EXPECT_EQ(parseUsageJson(first), (Usage{3, 1, 0})) << "usage first, pad " << pad;
        const std::string last =
            R"({"pad":")" + std::string(pad, 'x') + R"(","usage" : {"prompt_tokens":3,"completion_tokens":1}})";
        EXPECT_EQ(parseUsageJson(last), (Usage{3, 1, 0})) << "usage last, pad " << pad;
        EXPECT_FALSE(parseUsageJson(R"({"usage":null,"pad":")" + std::string(pad, 'x') + "\"}")) << pad;
    }
}

// What a backend cannot have meant is read as before (a non-count as
// absent) and flagged, for the relay to ignore and count.
std::optional<Usage> checked(std::string_view json, uint64_t max_tokens, bool& implausible) {
    implausible = false;
    return parseUsageJson(json, UsageCheck{.max_tokens = max_tokens, .implausible = &implausible});
}

TEST(UsageCheck, FlagsWhatNoBackendCanHaveMeant) {
    for (
        const char* usage : {
            R"({"prompt_tokens":18446744073709551615,"completion_tokens":2,"total_tokens":18446744073709551615})",
            R"({"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":18446744073709551615}})",
            R"({"prompt_tokens":-7,"completion_tokens":2})",
            R"({"prompt_tokens":7.5,"completion_tokens":2})",
            R"({"prompt_tokens":1e300,"completion_tokens":2})",
            R"({"prompt_tokens":99999999999999999999999,"completion_tokens":2})",
            R"({"prompt_tokens":"7","completion_tokens":2})",
            R"({"prompt_tokens":true,"completion_tokens":2})",
            R"({"prompt_tokens":{"a":1},"completion_tokens":2})",
            R"({"prompt_tokens":7,"completion_tokens":-2})",
            R"({"prompt_tokens":7,"completion_tokens":2,"total_tokens":-9})",
            R"({"prompt_tokens":7,"completion_tokens":2,"total_tokens":"9"})",
            R"({"prompt_tokens":7,"prompt_tokens_details":{"cached_tokens":-1}})",
            R"({"prompt_tokens":7,"prompt_tokens_details":{"cached_tokens":8}})",      // cached over prompt
            R"({"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}})",  // cached, no prompt
            R"({"prompt_tokens":1001,"completion_tokens":2})",                         // over the bound
            R"({"prompt_tokens":7,"completion_tokens":1001})",
            R"({"prompt_tokens":7,"completion_tokens":2,"total_tokens":1001})",
            R"({"prompt_tokens":-1})",  // nothing else: still a usage no backend means
        }) {
        const std::string answer = std::string(R"({"id":"x","choices":[],"usage":)") + usage + "}";
        bool implausible = false;
        (void)checked(answer, 1000, implausible);
        EXPECT_TRUE(implausible) << usage;
        bool whole = false;
        (void)readWholeUsage(answer, UsageCheck{.max_tokens = 1000, .implausible = &whole});
        EXPECT_TRUE(whole) << usage;
        bool end = false;
        (void)parseUsageJsonEnd(answer, UsageCheck{.max_tokens = 1000, .implausible = &end});
        EXPECT_TRUE(end) << usage;
    }
}

TEST(UsageCheck, PassesWhatBackendsWrite) {
    for (
        const char* usage : {
            R"({"prompt_tokens":7,"completion_tokens":2,"total_tokens":9})",
            R"({"prompt_tokens":1000,"completion_tokens":1000,"total_tokens":1000,"prompt_tokens_details":{"cached_tokens":1000}})",
            R"({"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,"prompt_tokens_details":null})",
            R"({"prompt_tokens":7,"completion_tokens":null,"prompt_tokens_details":{"cached_tokens":null}})",
            R"({"prompt_tokens":-0,"completion_tokens":3})",
            R"({"prompt_tokens":7,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":-5}})",
            R"({})",
            R"({"other":"x"})",
        }) {
        const std::string answer = std::string(R"({"choices":[],"usage":)") + usage + "}";
        bool implausible = true;
        (void)checked(answer, 1000, implausible);
        EXPECT_FALSE(implausible) << usage;
    }
}

TEST(UsageCheck, AFlaggedUsageIsStillReadAsBefore) {
    bool implausible = false;
    EXPECT_EQ(checked(R"({"usage":{"prompt_tokens":-5,"completion_tokens":2}})", 1000, implausible), (Usage{0, 2, 0}));
    EXPECT_TRUE(implausible);
    EXPECT_EQ(checked(R"({"usage":{"prompt_tokens":5000,"completion_tokens":2}})", 1000, implausible),
              (Usage{5000, 2, 0}));
    EXPECT_TRUE(implausible);
}

TEST(UsageCheck, ARepeatedKeyIsJudgedByItsLastValue) {
    bool implausible = true;
    EXPECT_EQ(checked(R"({"usage":{"prompt_tokens":-5,"prompt_tokens":5,"completion_tokens":2}})", 1000, implausible),
              (Usage{5, 2, 0}));
    EXPECT_FALSE(implausible);
    EXPECT_EQ(checked(R"({"usage":{"prompt_tokens":5,"prompt_tokens":-5,"completion_tokens":2}})", 1000, implausible),
              (Usage{0, 2, 0}));
    EXPECT_TRUE(implausible);
    EXPECT_EQ(checked(R"({"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":-1},)"
                      R"("prompt_tokens_details":{"cached_tokens":1}}})",
                      1000, implausible),
              (Usage{5, 0, 1}));
    EXPECT_FALSE(implausible);
}

TEST(SseUsageParser, TheLastUsageDecidesWhetherItIsPlausible) {
    const std::string plausible =
        "data: {\"choices\":[{\"delta\":{}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n";
    const std::string huge =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":18446744073709551615,"
        "\"completion_tokens\":2}}\n\n";
    const std::string text_only = "data: {\"choices\":[{\"delta\":{}}],\"usage\":{\"prompt_tokens\":\"x\"}}\n\n";
    {
        SseUsageParser p(SseUsageParser::kDefaultMaxEventBytes, 1000);
        p.observe(plausible + huge + kDone);
        p.finish();
        EXPECT_TRUE(p.implausibleUsage());
    }
    {
        SseUsageParser p(SseUsageParser::kDefaultMaxEventBytes, 1000);
        p.observe(huge + plausible + kDone);
        p.finish();
        EXPECT_FALSE(p.implausibleUsage());
        EXPECT_EQ(p.usage(), (Usage{5, 1, 0}));
    }
    {
        SseUsageParser p(SseUsageParser::kDefaultMaxEventBytes, 1000);
        p.observe(plausible + text_only);
        p.finish();
        EXPECT_TRUE(p.implausibleUsage());
    }
    {
        // The usage-only chunk dpgate asked for is cut however implausible.
        SseUsageParser p(SseUsageParser::kDefaultMaxEventBytes, 1000);
        std::string forward;
        p.filter(kChunk1 + huge + kDone, forward);
        p.finish(&forward);
        EXPECT_EQ(forward, kChunk1 + kDone);
        EXPECT_TRUE(p.implausibleUsage());
    }
}

TEST(SseUsageParser, ABrokenStreamDropsTheEventItBrokeInside) {
    const std::string half = kChunk2.substr(0, 40);
    {
        SseUsageParser p;
        std::string forward;
        p.filter(kChunk1 + half, forward);
        EXPECT_EQ(forward, kChunk1);
        EXPECT_FALSE(p.brokeOff());  // the client has none of it
        EXPECT_EQ(p.heldBytes(), 0u);
        p.finish(&forward);
        EXPECT_EQ(forward, kChunk1);  // dropped, not released
    }
    {
        SseUsageParser p;
        p.observe(kChunk1 + half);
        EXPECT_TRUE(p.brokeOff());  // observe mode: the client has its start
    }
    {
        SseUsageParser p;
        p.observe(kChunk1 + kChunk2);
        EXPECT_FALSE(p.brokeOff());  // between events
    }
    {
        // Filter mode passes an event over the cap on as it comes.
        SseUsageParser p(64);
        std::string forward;
        p.filter(kChunk1.substr(0, 100), forward);
        EXPECT_TRUE(p.brokeOff());
    }
}

}  // namespace
}  // namespace dpgate::gateway
