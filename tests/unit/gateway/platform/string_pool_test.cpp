#include "gateway/platform/string_pool.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace dpgate::gateway {
namespace {

// Empties this thread's pool (what earlier tests left in it).
void drain() {
    for (size_t i = 0; i < 2 * StringPool::kKeep; ++i) StringPool::take();
}

TEST(StringPool, AGivenBufferIsTakenAgainEmpty) {
    drain();
    std::string s(1000, 'x');
    const char* buffer = s.data();
    StringPool::give(std::move(s));
    std::string again = StringPool::take();
    EXPECT_TRUE(again.empty());
    EXPECT_EQ(again.data(), buffer);
    EXPECT_GE(again.capacity(), 1000u);
    EXPECT_EQ(StringPool::take().capacity(), std::string().capacity()) << "the pool is empty again";
}

TEST(StringPool, KeepsOnlyBuffersWorthKeepingAndAtMostKKeep) {
    drain();
    StringPool::give(std::string("short"));                         // never allocated
    StringPool::give(std::string(StringPool::kMaxBytes + 1, 'x'));  // too large to hold on to
    EXPECT_EQ(StringPool::take().capacity(), std::string().capacity());
    for (size_t i = 0; i < StringPool::kKeep + 5; ++i) StringPool::give(std::string(100, 'x'));
    size_t kept = 0;
    while (StringPool::take().capacity() > std::string().capacity()) ++kept;
    EXPECT_EQ(kept, StringPool::kKeep);
}

TEST(StringPool, EachThreadHasItsOwn) {
    drain();
    StringPool::give(std::string(100, 'x'));
    size_t other = 0;
    std::thread([&] { other = StringPool::take().capacity(); }).join();
    EXPECT_EQ(other, std::string().capacity());
    EXPECT_GE(StringPool::take().capacity(), 100u);
}

}  // namespace
}  // namespace dpgate::gateway
