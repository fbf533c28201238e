#include "gateway/http/head_writer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace dpgate::gateway {
namespace {

TEST(HeadWriter, PiecesAndNumbersFollowWhatTheStringHeld) {
    std::string head = "GET / HTTP/1.1\r\n";
    {
        HeadWriter w(head, 64);
        w.put("Host: ").put("sim").put(":").put(uint64_t(8000)).put("\r\n");
        w.put("Content-Length: ").put(uint64_t(0)).put("\r\n");
    }
    EXPECT_EQ(head, "GET / HTTP/1.1\r\nHost: sim:8000\r\nContent-Length: 0\r\n");
}

TEST(HeadWriter, TheStringEndsAfterWhatWasWrittenNotAfterTheRoom) {
    std::string head;
    {
        HeadWriter w(head, 4096);
        w.put("ab");
        EXPECT_GE(head.size(), 4096u) << "the room is made up front";
    }
    EXPECT_EQ(head, "ab");
}

TEST(HeadWriter, PiecesBeyondTheRoomGrowTheString) {
    std::string head;
    const std::string long_value(10'000, 'v');
    {
        HeadWriter w(head, 8);
        w.put("X-Long: ").put(long_value).put("\r\n");
        w.put(UINT64_MAX);  // the widest number, past the room again
    }
    EXPECT_EQ(head, "X-Long: " + long_value + "\r\n" + std::to_string(UINT64_MAX));
}

TEST(HeadWriter, NothingWrittenLeavesTheStringAsItWas) {
    std::string head = "kept";
    { HeadWriter w(head, 100); }
    EXPECT_EQ(head, "kept");
}

}  // namespace
}  // namespace dpgate::gateway
