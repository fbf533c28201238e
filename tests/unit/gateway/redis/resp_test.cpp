// RESP as dpgate reads and writes it: every reply type, input cut anywhere,
// pipelined replies, and the bounds on nesting and size.
#include "gateway/redis/resp.hpp"

#include <hiredis/hiredis.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dpgate::gateway::redis {
namespace {

// Every reply `bytes` holds, fed in pieces of `piece` bytes.
std::vector<Reply> readAll(std::string_view bytes, size_t piece, ReplyReader& reader) {
    std::vector<Reply> replies;
    for (size_t at = 0; at < bytes.size(); at += piece) {
        reader.feed(bytes.substr(at, piece));
        while (std::optional<Reply> reply = reader.next()) replies.push_back(std::move(*reply));
    }
    return replies;
}

std::vector<Reply> readAll(std::string_view bytes, size_t piece = 1 << 20) {
    ReplyReader reader;
    std::vector<Reply> replies = readAll(bytes, piece, reader);
    EXPECT_FALSE(reader.broken()) << reader.error();
    return replies;
}

// Why `bytes` break a reader with `limits`, "" when they do not.
std::string errorOf(std::string_view bytes, ReaderLimits limits = {}) {
    ReplyReader reader(limits);
    readAll(bytes, 1 << 20, reader);
    return reader.error();
}

using namespace std::string_literals;

const std::string kEveryType =
    "+OK\r\n"
    "-ERR unknown command\r\n"
    ":-42\r\n"
    "$5\r\nhe\0lo\r\n"
    "$0\r\n\r\n"
    "$-1\r\n"
    "*-1\r\n"
    "*0\r\n"
    "*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n+QUEUED\r\n"s;

TEST(ReplyReader, ReadsEveryType) {
    std::vector<Reply> r = readAll(kEveryType);
    ASSERT_EQ(r.size(), 9u);
    EXPECT_EQ(r[0].kind, Reply::Kind::status);
    EXPECT_EQ(r[0].str, "OK");
    EXPECT_EQ(r[1].kind, Reply::Kind::error);
    EXPECT_EQ(r[1].str, "ERR unknown command");
    EXPECT_EQ(r[2].kind, Reply::Kind::integer);
    EXPECT_EQ(r[2].integer, -42);
    EXPECT_EQ(r[3].kind, Reply::Kind::string);
    EXPECT_EQ(r[3].str, std::string("he\0lo", 5));
    EXPECT_EQ(r[4].kind, Reply::Kind::string);
    EXPECT_EQ(r[4].str, "");
    EXPECT_EQ(r[5].kind, Reply::Kind::nil);
    EXPECT_EQ(r[6].kind, Reply::Kind::nil);
    EXPECT_EQ(r[7].kind, Reply::Kind::array);
    EXPECT_TRUE(r[7].elements.empty());
    ASSERT_EQ(r[8].kind, Reply::Kind::array);
    ASSERT_EQ(r[8].elements.size(), 3u);
    EXPECT_EQ(r[8].elements[0].integer, 1);
    ASSERT_EQ(r[8].elements[1].elements.size(), 2u);
    EXPECT_EQ(r[8].elements[1].elements[0].str, "a");
    EXPECT_EQ(r[8].elements[1].elements[1].kind, Reply::Kind::nil);
    EXPECT_EQ(r[8].elements[2].kind, Reply::Kind::status);
    EXPECT_EQ(describe(r[8]), "[1, [\"a\", (nil)], QUEUED]");
}

TEST(ReplyReader, GivesTheSameRepliesHoweverTheBytesAreCut) {
    const std::string_view bytes = kEveryType;
    const std::vector<Reply> whole = readAll(bytes);
    for (size_t piece : {1, 2, 3, 5, 7, 13}) {
        std::vector<Reply> cut = readAll(bytes, piece);
        ASSERT_EQ(cut.size(), whole.size()) << piece;
        for (size_t i = 0; i < cut.size(); ++i) EXPECT_EQ(describe(cut[i]), describe(whole[i])) << piece << " " << i;
    }
}

TEST(ReplyReader, WaitsForTheRestOfAPartialReply) {
    ReplyReader reader;
    reader.feed("*2\r\n$3\r\nab");
    EXPECT_FALSE(reader.next().has_value());
    EXPECT_FALSE(reader.broken());
    reader.feed("c\r\n:7");
    EXPECT_FALSE(reader.next().has_value());
    reader.feed("\r\n");
    std::optional<Reply> reply = reader.next();
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(describe(*reply), "[\"abc\", 7]");
    EXPECT_FALSE(reader.next().has_value());
}

TEST(ReplyReader, BoundsTheNesting) {
    std::string five, six;
    for (int i = 0; i < 5; ++i) five += "*1\r\n";
    five += ":1\r\n";
    six = "*1\r\n" + five;
    EXPECT_EQ(errorOf(five), "");
    EXPECT_EQ(errorOf(six), "arrays nested deeper than 5");
    EXPECT_EQ(errorOf(five, ReaderLimits{.max_depth = 2, .max_reply_bytes = 1000}), "arrays nested deeper than 2");
    // Far deeper than hiredis's own stack of tasks.
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += "*1\r\n";
    EXPECT_EQ(errorOf(deep), "arrays nested deeper than 5");
}

TEST(ReplyReader, BoundsAReplysSize) {
    const ReaderLimits small{.max_depth = 5, .max_reply_bytes = 1000};
    // A bulk string announced larger than the bound: refused once more than
    // the bound waits, not only once all of it came.
    ReplyReader reader(small);
    reader.feed("$1000000000\r\n");
    EXPECT_FALSE(reader.next().has_value());
    EXPECT_FALSE(reader.broken());
    reader.feed(std::string(2000, 'x'));
    EXPECT_FALSE(reader.next().has_value());
    EXPECT_EQ(reader.error(), "a reply larger than 1000 bytes");
    // Many small elements add up.
    std::string many = "*100\r\n";
    for (int i = 0; i < 100; ++i) many += ":1\r\n";
    EXPECT_EQ(errorOf(many, small), "a reply larger than 1000 bytes");
    // An array announced huge costs nothing until its elements come.
    ReplyReader huge(small);
    huge.feed("*2147483647\r\n:1\r\n");
    EXPECT_FALSE(huge.next().has_value());
    EXPECT_FALSE(huge.broken());
    // Each reply has the whole bound.
    std::string pipelined;
    for (int i = 0; i < 100; ++i) pipelined += "$500\r\n" + std::string(500, 'y') + "\r\n";
    ReplyReader each(small);
    EXPECT_EQ(readAll(pipelined, 333, each).size(), 100u);
    EXPECT_FALSE(each.broken());
}

TEST(ReplyReader, RefusesMalformedInputAndStaysBroken) {
    EXPECT_NE(errorOf("?what\r\n"), "");
    EXPECT_NE(errorOf("$abc\r\n"), "");
    EXPECT_NE(errorOf("*x\r\n"), "");
    EXPECT_NE(errorOf("*-2\r\n"), "");
    EXPECT_NE(errorOf("$-2\r\n"), "");
    ReplyReader reader;
    reader.feed("!\r\n+OK\r\n");
    EXPECT_FALSE(reader.next().has_value());
    EXPECT_TRUE(reader.broken());
    reader.feed("+OK\r\n");
    EXPECT_FALSE(reader.next().has_value());
    EXPECT_TRUE(reader.broken());
}

TEST(FormatCommand, IsBinarySafeAndAsHiredisWritesIt) {
    const std::vector<std::string> argv = {"SET", std::string("k\0\r\n", 4), "", std::string(300, 'v')};
    const std::string ours = formatCommand(argv);
    std::vector<const char*> pointers;
    std::vector<size_t> lengths;
    for (const std::string& arg : argv) {
        pointers.push_back(arg.data());
        lengths.push_back(arg.size());
    }
    char* theirs = nullptr;
    const int size = redisFormatCommandArgv(&theirs, int(argv.size()), pointers.data(), lengths.data());
    ASSERT_GT(size, 0);
    EXPECT_EQ(ours, std::string(theirs, size_t(size)));
    redisFreeCommand(theirs);
    // A command is itself an array of bulk strings: it reads back.
    std::vector<Reply> back = readAll(ours, 3);
    ASSERT_EQ(back.size(), 1u);
    ASSERT_EQ(back[0].elements.size(), argv.size());
    for (size_t i = 0; i < argv.size(); ++i) EXPECT_EQ(back[0].elements[i].str, argv[i]);
    std::string two;
    appendCommand(two, {"PING"});
    appendCommand(two, {"ECHO", "x"});
    EXPECT_EQ(two, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n");
}

}  // namespace
}  // namespace dpgate::gateway::redis
