// DPGATE_PLAIN's values: 1 turns every fast path off, a list turns the
// named ones off, an unknown name is an error listing the valid names (and
// ends a process with status 2).
#include "common/fast_paths.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

namespace dpgate {
namespace {

TEST(FastPaths, EveryPathHasOneName) {
    ASSERT_EQ(fastPathNames().size(), kFastPathCount);
    std::set<std::string_view> names(fastPathNames().begin(), fastPathNames().end());
    EXPECT_EQ(names.size(), kFastPathCount);
    EXPECT_EQ(fastPathName(FastPath::bpe_rank_sweep), "bpe_rank_sweep");
    EXPECT_EQ(fastPathName(FastPath::heap_pages), "heap_pages");
}

TEST(FastPaths, OneTurnsEveryPathOffAndNothingTurnsNoneOff) {
    const PlainSwitches all = parsePlainSwitches("1");
    EXPECT_TRUE(all.error.empty());
    for (std::size_t i = 0; i < kFastPathCount; ++i) EXPECT_NE(all.off & (1u << i), 0u) << fastPathNames()[i];
    EXPECT_EQ(all.off >> kFastPathCount, 0u);
    for (const char* none : {"", "0", " "}) {
        const PlainSwitches s = parsePlainSwitches(none);
        EXPECT_EQ(s.off, 0u) << none;
        EXPECT_TRUE(s.error.empty()) << none;
    }
}

TEST(FastPaths, AListTurnsTheNamedOnesOff) {
    const PlainSwitches s = parsePlainSwitches("write_now, bpe_rank_sweep,write_now");
    EXPECT_TRUE(s.error.empty()) << s.error;
    EXPECT_EQ(s.off, (1u << unsigned(FastPath::write_now)) | (1u << unsigned(FastPath::bpe_rank_sweep)));
}

TEST(FastPaths, AnUnknownNameIsAnErrorListingTheValidOnes) {
    const PlainSwitches s = parsePlainSwitches("write_now,turbo,");
    EXPECT_NE(s.error.find("unknown fast path \"turbo\", \"\""), std::string::npos) << s.error;
    for (const std::string_view name : fastPathNames()) EXPECT_NE(s.error.find(name), std::string::npos) << name;
    EXPECT_FALSE(parsePlainSwitches("all").error.empty());
    EXPECT_FALSE(parsePlainSwitches("Write_Now").error.empty());
}

TEST(FastPathsDeathTest, AnUnknownNameEndsTheProcessWithStatus2) {
    GTEST_FLAG_SET(death_test_style, "fast");
    EXPECT_EXIT(
        {
            ::setenv("DPGATE_PLAIN", "turbo", 1);
            fast_paths_detail::offFromEnvironment();
        },
        ::testing::ExitedWithCode(2), "DPGATE_PLAIN: unknown fast path \"turbo\"");
}

// What a static initializer of this file saw, before main(): the switch is
// read before any of them runs.
const std::uint32_t kOnAtStaticInit = [] {
    std::uint32_t on = 0;
    for (std::size_t i = 0; i < kFastPathCount; ++i)
        if (fastPathOn(static_cast<FastPath>(i))) on |= 1u << i;
    return on;
}();

TEST(FastPaths, AStaticInitializerSeesTheProcessValue) {
    const char* value = std::getenv("DPGATE_PLAIN");
    const PlainSwitches expected = parsePlainSwitches(value ? value : "");
    EXPECT_EQ(kOnAtStaticInit, ~expected.off & ((1u << kFastPathCount) - 1));
}

TEST(FastPaths, TheProcessFollowsItsEnvironment) {
    const char* value = std::getenv("DPGATE_PLAIN");
    const PlainSwitches expected = parsePlainSwitches(value ? value : "");
    for (std::size_t i = 0; i < kFastPathCount; ++i) {
        EXPECT_EQ(fastPathOn(static_cast<FastPath>(i)), (expected.off & (1u << i)) == 0) << fastPathNames()[i];
    }
}

}  // namespace
}  // namespace dpgate
