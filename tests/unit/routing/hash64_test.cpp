#include "routing/hash64.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <string>

using namespace dpgate::routing;

namespace {

std::uint64_t textHash(const std::string& text) { return Hasher64(7).addText(text).digest(); }

std::string randomText(std::mt19937_64& random, size_t size) {
    std::string text(size, '\0');
    for (char& c : text) c = static_cast<char>(random());
    return text;
}

}  // namespace

// Sizes cover every path of addText: the two lanes (64 B and up), the 16-byte
// loop, the 8-byte step and each short tail length.
TEST(Hasher64, TextHashDependsOnEveryByte) {
    std::mt19937_64 random(1);
    for (size_t size : {0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 63, 64, 65, 95, 96, 200, 301}) {
        const std::string text = randomText(random, size);
        const std::uint64_t base = textHash(text);
        for (size_t i = 0; i < size; ++i) {
            std::string changed = text;
            changed[i] ^= 0x01;
            EXPECT_NE(textHash(changed), base) << "size " << size << ", byte " << i;
        }
    }
}

TEST(Hasher64, OneBitFlipsAboutHalfTheDigest) {
    std::mt19937_64 random(2);
    double flipped = 0;
    int trials = 0;
    for (size_t size : {5, 12, 40, 70, 1000}) {
        for (int t = 0; t < 200; ++t) {
            const std::string text = randomText(random, size);
            std::string changed = text;
            const size_t bit = random() % (size * 8);
            changed[bit / 8] ^= static_cast<char>(1u << (bit % 8));
            flipped += std::popcount(textHash(text) ^ textHash(changed));
            ++trials;
        }
    }
    EXPECT_NEAR(flipped / trials, 32.0, 1.5);
}

TEST(Hasher64, TextFieldsAreLengthPrefixed) {
    auto pair = [](std::string_view a, std::string_view b) { return Hasher64(7).addText(a).addText(b).digest(); };
    EXPECT_NE(pair("ab", "c"), pair("a", "bc"));
    EXPECT_NE(pair("", "x"), pair("x", ""));
    const std::string long_a(100, 'a');
    EXPECT_NE(pair(long_a + "b", "c"), pair(long_a, "bc"));
    EXPECT_NE(textHash(std::string(64, 's')), textHash(std::string(80, 's')));
}

TEST(Hasher64, SeedChangesTheHash) {
    EXPECT_NE(Hasher64(1).addText("same").digest(), Hasher64(2).addText("same").digest());
}
