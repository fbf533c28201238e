#include "gateway/net/write_now.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace dpgate::gateway {
namespace {

struct Pair {
    net::io_context io;
    tcp::socket writer{io}, reader{io};
    Pair() {
        tcp::acceptor acceptor(io, {net::ip::make_address("127.0.0.1"), 0});
        writer.connect(acceptor.local_endpoint());
        reader = acceptor.accept();
    }
};

TEST(WriteNow, ASmallWriteIsDoneAtOnce) {
    Pair p;
    const std::string head = "HTTP/1.1 200 OK\r\n\r\n", body = "{}";
    const std::array<net::const_buffer, 2> buffers{net::buffer(head), net::buffer(body)};
    WriteNow now(&p.writer, buffers, true);
    EXPECT_TRUE(now.done());
    EXPECT_EQ(net::buffer_size(now.rest()), 0u);
    std::string got(head.size() + body.size(), '\0');
    net::read(p.reader, net::buffer(got));
    EXPECT_EQ(got, head + body);
}

TEST(WriteNow, SmallPiecesWithEmptyOnesBetweenArriveAsOneInOrder) {
    Pair p;
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", body = "{\"a\":1", tail = "}";
    const std::array<net::const_buffer, 5> buffers{net::const_buffer(), net::buffer(head), net::const_buffer(),
                                                   net::buffer(body), net::buffer(tail)};
    WriteNow now(&p.writer, buffers, true);
    EXPECT_TRUE(now.done());
    std::string got(head.size() + body.size() + tail.size(), '\0');
    net::read(p.reader, net::buffer(got));
    EXPECT_EQ(got, head + body + tail);
    // A lone non-empty piece among empty ones goes out as it is.
    const std::array<net::const_buffer, 3> one{net::const_buffer(), net::buffer(body), net::const_buffer()};
    EXPECT_TRUE(WriteNow(&p.writer, one, true).done());
    std::string again(body.size(), '\0');
    net::read(p.reader, net::buffer(again));
    EXPECT_EQ(again, body);
}

TEST(WriteNow, WhatTheSocketDoesNotTakeIsLeftInOrderForTheAsyncWrite) {
    Pair p;
    // More than a loopback socket's buffers hold while nobody reads.
    std::string big(64 << 20, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = char('a' + i % 26);
    const std::array<net::const_buffer, 2> buffers{net::buffer(big.data(), 10),
                                                   net::buffer(big.data() + 10, big.size() - 10)};
    WriteNow now(&p.writer, buffers, true);
    ASSERT_FALSE(now.done());
    const size_t left = net::buffer_size(now.rest());
    EXPECT_GT(left, 0u);
    EXPECT_LT(left, big.size()) << "the socket took a first part at once";
    std::string got(big.size(), '\0');
    bool wrote = false, read = false;
    // What the relay does with the rest: writeRest(), in a coroutine of its own.
    net::co_spawn(
        p.io,
        [&]() -> awaitable<void> {
            const error_code ec = co_await writeRest(p.writer, now);
            EXPECT_FALSE(ec);
            wrote = true;
        },
        net::detached);
    net::async_read(p.reader, net::buffer(got), [&](error_code ec, size_t) {
        EXPECT_FALSE(ec);
        read = true;
    });
    p.io.run();
    EXPECT_TRUE(wrote && read);
    EXPECT_TRUE(got == big);
}

// The plain twin (try_now false, as DPGATE_PLAIN=write_now makes it): nothing
// is tried, the async write sends every byte, and the peer reads the same
// bytes in the same order as after the fast path.
TEST(WriteNow, WithOrWithoutTheFirstTryThePeerReadsTheSameBytes) {
    for (const bool try_now : {true, false}) {
        Pair p;
        std::string big(1 << 20, '\0');
        for (size_t i = 0; i < big.size(); ++i) big[i] = char('a' + i % 26);
        const std::string head = "HTTP/1.1 200 OK\r\n\r\n";
        const std::array<net::const_buffer, 3> buffers{net::buffer(head), net::const_buffer(), net::buffer(big)};
        WriteNow now(&p.writer, buffers, try_now);
        if (!try_now) {
            EXPECT_FALSE(now.done());
            EXPECT_EQ(net::buffer_size(now.rest()), head.size() + big.size());
        }
        std::string got(head.size() + big.size(), '\0');
        bool wrote = now.done(), read = false;
        if (!now.done()) {
            net::co_spawn(
                p.io,
                [&]() -> awaitable<void> {
                    const error_code ec = co_await writeRest(p.writer, now);
                    EXPECT_FALSE(ec);
                    wrote = true;
                },
                net::detached);
        }
        net::async_read(p.reader, net::buffer(got), [&](error_code ec, size_t) {
            EXPECT_FALSE(ec);
            read = true;
        });
        p.io.run();
        EXPECT_TRUE(wrote && read) << try_now;
        EXPECT_TRUE(got == head + big) << try_now;
    }
}

TEST(WriteNow, NoSocketTriesNothing) {
    const std::string text = "x";
    const std::array<net::const_buffer, 1> buffers{net::buffer(text)};
    WriteNow now(static_cast<tcp::socket*>(nullptr), buffers);
    EXPECT_FALSE(now.done());
    EXPECT_EQ(net::buffer_size(now.rest()), 1u);
}

TEST(WriteNow, AFailedAttemptLeavesEverythingForTheAsyncWriteToReport) {
    Pair p;
    p.reader.close();
    std::string text(1 << 20, 'x');
    const std::array<net::const_buffer, 1> buffers{net::buffer(text)};
    // The first send after the peer closed may still be taken; keep writing until one fails.
    bool failed_once = false;
    for (int i = 0; i < 100 && !failed_once; ++i) {
        WriteNow now(&p.writer, buffers, true);
        if (!now.done() && net::buffer_size(now.rest()) == text.size()) failed_once = true;
    }
    EXPECT_TRUE(failed_once);
    error_code ec;
    net::write(p.writer, buffers, ec);
    EXPECT_TRUE(ec) << "the write that follows meets the error";
}

}  // namespace
}  // namespace dpgate::gateway
