// The usage tap: what the client gets of each piece of an answer, and the
// usage it reads, in each of its three modes.
#include "gateway/path/usage_tap.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dpgate::gateway {
namespace {

const std::string kUsage = R"("usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,)"
                           R"("prompt_tokens_details":{"cached_tokens":8}})";
const std::string kAnswer = R"({"id":"a","choices":[{"index":0,"message":{"content":"hi"}}],)" + kUsage + "}";
const std::string kEvent = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
const std::string kUsageEvent = "data: {\"choices\":[]," + kUsage + "}\n\n";
const std::string kDone = "data: [DONE]\n\n";

Usage expected() { return Usage{.prompt_tokens = 12, .completion_tokens = 3, .cached_prompt_tokens = 8}; }

TEST(UsageTap, JsonInOnePieceIsReadWhereItLies) {
    UsageTap tap(UsageTap::Mode::json, 1 << 20);
    EXPECT_EQ(tap.pass(kAnswer, true, true), kAnswer);
    bool implausible = true;
    EXPECT_EQ(tap.usage(implausible), expected());
    EXPECT_FALSE(implausible);
}

TEST(UsageTap, JsonInPiecesIsCopied) {
    UsageTap tap(UsageTap::Mode::json, 1 << 20);
    for (size_t i = 0; i < kAnswer.size(); i += 7) {
        const std::string piece = kAnswer.substr(i, 7);
        EXPECT_EQ(tap.pass(piece, i == 0, i + 7 >= kAnswer.size()), piece);
    }
    bool implausible = false;
    EXPECT_EQ(tap.usage(implausible), expected());
}

TEST(UsageTap, JsonPastOneMebibyteKeepsItsEnd) {
    UsageTap tap(UsageTap::Mode::json, 1 << 20);
    const std::string head = R"({"id":"a","choices":[{"index":0,"message":{"content":")";
    tap.pass(head, true, false);
    const std::string filler(64 * 1024, 'x');
    for (int i = 0; i < 20; ++i) tap.pass(filler, false, false);
    tap.pass("\"}}]," + kUsage + "}", false, true);
    bool implausible = false;
    EXPECT_EQ(tap.usage(implausible), expected());
}

TEST(UsageTap, ObservedStreamGoesThroughAsItIs) {
    UsageTap tap(UsageTap::Mode::observe, 1 << 20);
    const std::string stream = kEvent + kUsageEvent + kDone;
    EXPECT_EQ(tap.pass(stream.substr(0, 20), true, false), stream.substr(0, 20));
    EXPECT_EQ(tap.pass(stream.substr(20), false, true), stream.substr(20));
    EXPECT_EQ(tap.finish(), "");
    bool implausible = false;
    EXPECT_EQ(tap.usage(implausible), expected());
}

TEST(UsageTap, FilteredStreamLosesTheUsageChunkAndHoldsUnfinishedEvents) {
    UsageTap tap(UsageTap::Mode::filter, 1 << 20);
    std::string seen;
    seen += tap.pass(kEvent + kUsageEvent.substr(0, 10), true, false);
    EXPECT_EQ(seen, kEvent);  // the usage event's start is held back
    seen += tap.pass(kUsageEvent.substr(10) + kDone, false, true);
    seen += tap.finish();
    EXPECT_EQ(seen, kEvent + kDone);
    bool implausible = false;
    EXPECT_EQ(tap.usage(implausible), expected());
}

TEST(UsageTap, ImplausibleUsageIsNoneAndSaidSo) {
    UsageTap tap(UsageTap::Mode::json, 10);  // no count of this answer can exceed 10
    tap.pass(kAnswer, true, true);
    bool implausible = false;
    EXPECT_EQ(tap.usage(implausible), std::nullopt);
    EXPECT_TRUE(implausible);
}

TEST(UsageTap, ABrokenStreamTellsWhetherAnEventHadBegun) {
    UsageTap observe(UsageTap::Mode::observe, 1 << 20);
    observe.pass(kEvent + "data: {\"cho", true, false);
    EXPECT_TRUE(observe.brokeOff());  // observed bytes reached the client
    UsageTap filter(UsageTap::Mode::filter, 1 << 20);
    filter.pass(kEvent + "data: {\"cho", true, false);
    EXPECT_FALSE(filter.brokeOff());  // held back: nothing of it went out
    UsageTap json(UsageTap::Mode::json, 1 << 20);
    EXPECT_FALSE(json.brokeOff());
}

}  // namespace
}  // namespace dpgate::gateway
