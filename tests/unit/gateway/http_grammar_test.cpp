#include "gateway/http_grammar.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

using namespace dpgate::gateway::grammar;
namespace http = boost::beast::http;

TEST(HttpGrammar, FieldIdIsBeastsCodeForEveryNameInAnyCase) {
    size_t names = 0;
    for (unsigned code = 1; code <= unsigned(http::field::xref); ++code) {
        const auto id = static_cast<http::field>(code);
        const std::string name(http::to_string(id));
        std::string upper = name, mixed = name;
        for (size_t i = 0; i < name.size(); ++i) {
            upper[i] = char(std::toupper(static_cast<unsigned char>(name[i])));
            if (i % 2) mixed[i] = upper[i];
        }
        EXPECT_EQ(fieldId(name), id) << name;
        EXPECT_EQ(fieldId(upper), id) << upper;
        EXPECT_EQ(fieldId(mixed), id) << mixed;
        ++names;
    }
    EXPECT_GT(names, 300u);
    for (const char* other : {"x-session-id", "hostt", "hos", "content_length", "Content-Lengtj", ""})
        EXPECT_EQ(fieldId(other), http::string_to_field(other)) << other;
}

TEST(HttpGrammar, ContentLengthIsOneOrMoreEqualLengthsWithin64Bits) {
    uint64_t length = 0;
    EXPECT_EQ(readContentLength("18446744073709551615", length), nullptr);
    EXPECT_EQ(length, UINT64_MAX);
    EXPECT_NE(readContentLength("18446744073709551616", length), nullptr);
    EXPECT_EQ(readContentLength("7 ,7", length), nullptr);
    EXPECT_EQ(length, 7u);
    EXPECT_NE(readContentLength("7,8", length), nullptr);
    EXPECT_NE(readContentLength("7,", length), nullptr);
    EXPECT_NE(readContentLength("+7", length), nullptr);
}

TEST(HttpGrammar, ChunkSizeLines) {
    uint64_t size = 0;
    EXPECT_EQ(readChunkSize("1aF", size), ChunkLine::ok);
    EXPECT_EQ(size, 0x1afu);
    EXPECT_EQ(readChunkSize("5;a=b;c", size), ChunkLine::ok);
    EXPECT_EQ(readChunkSize("", size), ChunkLine::malformed);
    EXPECT_EQ(readChunkSize(";a", size), ChunkLine::malformed);
    EXPECT_EQ(readChunkSize("5;", size), ChunkLine::refused);
    EXPECT_EQ(readChunkSize("5 ", size), ChunkLine::refused);
    EXPECT_EQ(readChunkSize("5;a=\"q\"", size), ChunkLine::refused);
    EXPECT_EQ(readChunkSize("00000000000000001", size), ChunkLine::refused);
}
