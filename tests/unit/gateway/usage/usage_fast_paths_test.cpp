// The usage reader's fast paths against their plain twins: the SSE2 scans
// (stream_usage_sse2.hpp) stop where a plain search stops, and the reader
// of usage as backends write it (written_usage.hpp) answers as simdjson's
// reader of the whole answer does, or leaves the spelling to it.
#include "gateway/usage/stream_usage_sse2.hpp"
#include "gateway/usage/written_usage.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace dpgate::gateway {
namespace {

TEST(UsageFastPaths, TheSse2ScansStopWhereAPlainSearchStops) {
    std::mt19937 rng(15);
    const std::string alphabet = "\"usage:{}\r\n ab";
    const std::vector<std::string> needles = {"\"usage\"", "[DONE]", "us", "\"\""};
    for (int round = 0; round < 50000; ++round) {
        std::string text(rng() % 80, ' ');
        for (char& c : text) c = alphabet[rng() % alphabet.size()];
        const std::string_view view(text);
        for (const std::string& needle : needles) {
            if (text.size() < needle.size()) continue;
            const size_t from = rng() % (text.size() - needle.size() + 1);
            size_t i = from;
            const size_t at = findInSse2(view, needle, i, text.size() - needle.size());
            const size_t plain = view.find(needle, from);
            if (at != std::string_view::npos) {
                ASSERT_EQ(at, plain) << text;
            } else {
                ASSERT_TRUE(plain == std::string_view::npos || plain >= i) << text;  // the byte loop goes on from i
            }
        }
        const size_t from = text.empty() ? 0 : rng() % text.size();
        const size_t line = lineEndSse2(view, from);
        const size_t plain_line = std::min(view.find_first_of("\r\n", from), text.size());
        ASSERT_LE(line, plain_line) << text;
        ASSERT_TRUE(line == plain_line || line + 16 > text.size()) << text;
        size_t at = rng() % (text.size() + 1);
        const size_t start = at;
        const size_t plain_quote = start == 0 ? std::string_view::npos : view.rfind('"', start - 1);
        if (previousQuoteSse2(view, at)) {
            ASSERT_EQ(at, plain_quote) << text;
        } else {
            ASSERT_LT(at, 16u);
            ASSERT_TRUE(plain_quote == std::string_view::npos || plain_quote < at) << text;
        }
    }
}

TEST(UsageFastPaths, TheWrittenShapeReadsAsSimdjsonReadsIt) {
    const std::vector<std::string> values = {
        R"({"prompt_tokens":12,"completion_tokens":3,"total_tokens":15})",
        R"({"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}})",
        R"({"prompt_tokens": 12, "completion_tokens": null, "prompt_tokens_details": null})",
        R"({ "prompt_tokens" : 7 , "extra" : 1 , "completion_tokens" : 0 })",
        R"({"prompt_tokens":1,"prompt_tokens":2,"completion_tokens":5})",
        R"({"prompt_tokens":18446744073709551615,"completion_tokens":1})",
        R"({"prompt_tokens":99999999999999999999,"completion_tokens":1})",
        R"({"prompt_tokens":012,"completion_tokens":1})",
        R"({"prompt_tokens":-1,"completion_tokens":1})",
        R"({"prompt_tokens":1.0,"completion_tokens":1})",
        R"({"prompt_tokens":1e3,"completion_tokens":1})",
        R"({"prompt_tokens":"12","completion_tokens":1})",
        R"({"prompt\u005ftokens":12,"completion_tokens":1})",
        R"({"prompt_tokens":[1],"completion_tokens":1})",
        R"({"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},"prompt_tokens":9,"completion_tokens":1})",
        R"({})",
        R"({"prompt_tokens":3,})",
        R"({"prompt_tokens":3)",
        R"(null)",
    };
    size_t written = 0;
    for (const std::string& value : values) {
        const std::string answer = R"({"id":"x","choices":[],"usage":)" + value + "}";
        bool whole_implausible = false;
        const std::optional<Usage> whole = readWholeUsage(answer, UsageCheck{.implausible = &whole_implausible});
        UsageCounts counts;
        if (!readWrittenUsage(value, true, counts)) continue;  // unsure: simdjson reads it
        ++written;
        bool implausible = false;
        const std::optional<Usage> fast = usageOf(counts, UsageCheck{.implausible = &implausible});
        ASSERT_EQ(fast.has_value(), whole.has_value()) << value;
        if (fast) {
            EXPECT_EQ(fast->prompt_tokens, whole->prompt_tokens) << value;
            EXPECT_EQ(fast->completion_tokens, whole->completion_tokens) << value;
            EXPECT_EQ(fast->cached_prompt_tokens, whole->cached_prompt_tokens) << value;
        }
        EXPECT_EQ(implausible, whole_implausible) << value;
    }
    EXPECT_GE(written, 6u) << "the written shape reads backends' own spellings";
}

}  // namespace
}  // namespace dpgate::gateway
