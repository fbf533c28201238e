#include "gateway/http/http_grammar.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <random>
#include <string>
#include <vector>

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

// fieldId compares the names it knows by eight or four bytes at a time: a
// name one byte off any of them, in any byte, is not taken for it.
TEST(HttpGrammar, FieldIdTellsNamesOneByteOffTheCommonOnes) {
    size_t checked = 0;
    for (std::string_view name : {"host", "date", "accept", "server", "connection", "user-agent", "keep-alive",
                                  "content-type", "authorization", "content-length", "transfer-encoding"}) {
        for (size_t i = 0; i < name.size(); ++i) {
            for (int c = 0x21; c < 0x7f; ++c) {
                if (!is(char(c), kToken) || char(c | 0x20) == name[i]) continue;
                std::string other(name);
                other[i] = char(c);
                ASSERT_EQ(fieldId(other), http::string_to_field(other)) << other;
                ++checked;
            }
        }
    }
    EXPECT_GT(checked, 7000u);
}

// skipRun and skipToken judge sixteen bytes at once: they stop where the byte-by-byte
// loop stops, for every byte at every place in a run and past its end, and
// reads nothing at or beyond `end` (the buffer is exactly that long, so
// ASan would see it).
TEST(HttpGrammar, SkipRunStopsWhereTheByteLoopStops) {
    auto byByte = [](const char* p, CharClass kind) {
        while (is(*p, kind)) ++p;
        return p;
    };
    size_t checked = 0;
    for (const std::string& fill : {std::string("a"), std::string("Content-Type9"), std::string("x_y.z!~|"),
                                    std::string("\xc3\xa9 \t~/"), std::string("\x80\xff!")}) {
        for (size_t length = 0; length <= 40; ++length) {
            for (int stop = 0; stop < 256; ++stop) {
                std::string run;
                while (run.size() < length) run += fill[run.size() % fill.size()];
                std::vector<char> buffer(run.begin(), run.end());
                buffer.push_back(char(stop));
                for (char c : std::string_view("\r\n\r\n")) buffer.push_back(c);
                const char* const begin = buffer.data();
                const char* const end = begin + buffer.size();
                ASSERT_EQ(skipRun<kValue>(begin, end), byByte(begin, kValue)) << length << " " << stop;
                ASSERT_EQ(skipRun<kTarget>(begin, end), byByte(begin, kTarget)) << length << " " << stop;
                ASSERT_EQ(skipToken(begin, end), byByte(begin, kToken)) << length << " " << stop;
                ++checked;
            }
        }
    }
    EXPECT_EQ(checked, 5u * 41 * 256);
}

// findHeadEnd finds the LFs sixteen bytes at a time: the same end, and the
// same bare LF, as judging every LF in order one byte at a time, on text
// made mostly of CR, LF and one other byte, at every length and offset.
TEST(HttpGrammar, FindHeadEndJudgesEveryLineFeedInOrder) {
    auto byByte = [](std::string_view bytes, bool& bare_lf) -> size_t {
        for (size_t i = 0; i < bytes.size(); ++i) {
            if (bytes[i] != '\n') continue;
            if (i == 0 || bytes[i - 1] != '\r') {
                bare_lf = true;
                return 0;
            }
            if (i >= 3 && bytes.substr(i - 3, 3) == "\r\n\r") return i + 1;
        }
        return 0;
    };
    std::mt19937 random(18);
    size_t ends = 0, bare = 0;
    for (int round = 0; round < 200000; ++round) {
        std::vector<char> text(random() % 72);  // exactly as long: ASan sees a read past it
        for (char& c : text) c = "\r\n\r\nxxxxxx"[random() % (round % 2 ? 4 : 10)];
        const std::string_view bytes(text.data(), text.size());
        bool bare_lf = false, expected_bare_lf = false;
        const size_t end = findHeadEnd(bytes, bare_lf);
        ASSERT_EQ(end, byByte(bytes, expected_bare_lf)) << std::string(bytes);
        ASSERT_EQ(bare_lf, expected_bare_lf) << std::string(bytes);
        ends += end > 0;
        bare += bare_lf;
    }
    EXPECT_GT(ends, 10000u);
    EXPECT_GT(bare, 10000u);
    bool bare_lf = false;
    const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}";
    EXPECT_EQ(findHeadEnd(head, bare_lf), head.size() - 2);
    EXPECT_FALSE(bare_lf);
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

// The SSE2 scans (http_grammar_sse2.hpp) stop where the byte loops stop, on
// runs of every length from every alignment, ended by each byte value, and
// find the same head end and bare LF in heads of CRLF, LF and CR mixes.
TEST(HttpGrammar, TheSse2ScansStopWhereTheByteLoopsStop) {
    std::mt19937 rng(9112);
    for (unsigned stop = 0; stop < 256; ++stop) {
        for (size_t run = 0; run < 40; ++run) {
            for (const char fill : {'a', 'Z', '7', '-', '_', ' ', '\t', '\x80', '\xff', '/'}) {
                std::string bytes(run, fill);
                bytes += char(stop);
                bytes += std::string(size_t(rng() % 20), char(rng()));
                bytes += '\r';
                const char* p = bytes.data();
                const char* end = p + bytes.size();
                ASSERT_EQ(skipRun<kTarget>(p, end, true), skipRun<kTarget>(p, end, false)) << stop << " " << run;
                ASSERT_EQ(skipRun<kValue>(p, end, true), skipRun<kValue>(p, end, false)) << stop << " " << run;
                ASSERT_EQ(skipToken(p, end, true), skipToken(p, end, false)) << stop << " " << run;
            }
        }
    }
    const std::vector<std::string> pieces = {"GET / HTTP/1.1", "\r\n", "\n", "\r", "Host: x", "a: b", "", "\r\n\r\n"};
    for (int round = 0; round < 20000; ++round) {
        std::string head;
        for (int k = int(rng() % 12); k > 0; --k) head += pieces[rng() % pieces.size()];
        bool bare_fast = false, bare_plain = false;
        const size_t fast = findHeadEnd(head, bare_fast, true);
        const size_t plain = findHeadEnd(head, bare_plain, false);
        ASSERT_EQ(fast, plain) << head;
        ASSERT_EQ(bare_fast, bare_plain) << head;
    }
}
