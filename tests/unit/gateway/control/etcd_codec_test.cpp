// The etcd JSON gateway's encodings: base64 keys and values, prefix ranges,
// int64 fields as strings, and kv objects that may lack their value.
#include "gateway/control/etcd_codec.hpp"

#include <gtest/gtest.h>

namespace dpgate::gateway::control {
namespace {

TEST(Base64, RoundTripsEveryLengthAndByte) {
    std::string bytes;
    for (int i = 0; i < 300; ++i) {
        const std::string encoded = base64Encode(bytes);
        EXPECT_EQ(encoded.size() % 4, 0u);
        std::optional<std::string> decoded = base64Decode(encoded);
        ASSERT_TRUE(decoded.has_value()) << i;
        EXPECT_EQ(*decoded, bytes);
        bytes += char(i * 37);
    }
    EXPECT_EQ(base64Encode("/dpgate/state"), "L2RwZ2F0ZS9zdGF0ZQ==");
}

TEST(Base64, RefusesWhatIsNotStandardBase64) {
    for (const char* bad : {"abc", "ab=c", "=abc", "a===", "ab$d", "L2Rw\nZ2F0", "ab==cd=="})
        EXPECT_FALSE(base64Decode(bad).has_value()) << bad;
    EXPECT_EQ(base64Decode(""), std::string());
}

TEST(PrefixEnd, IsTheSmallestKeyAboveThePrefix) {
    EXPECT_EQ(prefixEnd("/dpgate/"), "/dpgate0");
    EXPECT_EQ(prefixEnd(std::string("a\xff", 2)), "b");
    EXPECT_EQ(prefixEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
}

TEST(ReadKv, DecodesKeysValuesAndRevisions) {
    const nlohmann::json kv = nlohmann::json::parse(
        R"({"key":"L3gvc3RhdGU=","create_revision":"2","mod_revision":"31","version":"1","value":"aGVsbG8=","lease":"7587899422179860489"})");
    std::optional<Kv> read = readKv(kv);
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(read->key, "/x/state");
    EXPECT_EQ(read->value, "hello");
    EXPECT_EQ(read->mod_revision, 31);
    EXPECT_EQ(read->create_revision, 2);
    EXPECT_EQ(read->lease, 7587899422179860489);
    // A deleted key's event has no value; an empty value is left out too.
    std::optional<Kv> deleted = readKv(nlohmann::json::parse(R"({"key":"L3gvYQ==","mod_revision":"5"})"));
    ASSERT_TRUE(deleted.has_value());
    EXPECT_EQ(deleted->value, "");
    EXPECT_FALSE(readKv(nlohmann::json::parse(R"({"value":"aGVsbG8="})")).has_value());
    EXPECT_FALSE(readKv(nlohmann::json::parse(R"({"key":"not base64!"})")).has_value());
    EXPECT_FALSE(readKv(nlohmann::json::parse(R"([1,2])")).has_value());
}

TEST(ReadInt64, ReadsStringsAndNumbersAndRefusesOverflow) {
    const nlohmann::json o = nlohmann::json::parse(R"({"a":"42","b":7,"c":"99999999999999999999","d":"-1","e":null})");
    EXPECT_EQ(readInt64(o, "a"), 42);
    EXPECT_EQ(readInt64(o, "b"), 7);
    EXPECT_EQ(readInt64(o, "c"), 0);
    EXPECT_EQ(readInt64(o, "d"), 0);
    EXPECT_EQ(readInt64(o, "e"), 0);
    EXPECT_EQ(readInt64(o, "missing"), 0);
}

}  // namespace
}  // namespace dpgate::gateway::control
