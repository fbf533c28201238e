// send() and recv() made directly (the fast path uncancellable_io) answer
// as glibc's calls (its plain twin) do: the bytes, the end of the stream,
// EAGAIN on an empty non-blocking socket, MSG_PEEK, and errno on a bad
// descriptor.
#include "gateway/platform/uncancellable_io.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace dpgate::gateway {
namespace {

struct SocketPair {
    int fd[2] = {-1, -1};
    SocketPair() {
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0);
        for (const int f : fd) ::fcntl(f, F_SETFL, ::fcntl(f, F_GETFL) | O_NONBLOCK);
    }
    ~SocketPair() {
        for (const int f : fd)
            if (f >= 0) ::close(f);
    }
};

TEST(UncancellableIo, DirectCallsAnswerAsTheLibcCalls) {
    for (const bool direct : {true, false}) {
        SocketPair p;
        char buffer[16] = {};
        errno = 0;
        EXPECT_EQ(recvUncancellable(p.fd[1], buffer, sizeof buffer, 0, direct), -1) << direct;
        EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << direct;
        EXPECT_EQ(sendUncancellable(p.fd[0], "hello", 5, MSG_NOSIGNAL, direct), 5) << direct;
        EXPECT_EQ(recvUncancellable(p.fd[1], buffer, 1, MSG_PEEK, direct), 1) << direct;
        EXPECT_EQ(buffer[0], 'h');
        EXPECT_EQ(recvUncancellable(p.fd[1], buffer, sizeof buffer, 0, direct), 5) << direct;
        EXPECT_EQ(std::string(buffer, 5), "hello");
        ::close(p.fd[0]);
        p.fd[0] = -1;
        EXPECT_EQ(recvUncancellable(p.fd[1], buffer, sizeof buffer, 0, direct), 0) << direct;
        errno = 0;
        EXPECT_EQ(sendUncancellable(p.fd[1], "x", 1, MSG_NOSIGNAL, direct), -1) << direct;
        EXPECT_EQ(errno, EPIPE) << direct;
        errno = 0;
        EXPECT_EQ(recvUncancellable(-1, buffer, 1, 0, direct), -1) << direct;
        EXPECT_EQ(errno, EBADF) << direct;
    }
}

}  // namespace
}  // namespace dpgate::gateway
