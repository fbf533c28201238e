#include "gateway/net/idle_list.hpp"

#include <gtest/gtest.h>

namespace dpgate::gateway {
namespace {

TEST(IdleList, TheOldestIsFirstAndIsPublished) {
    IdleList list;
    IdleHook a(nullptr), b(nullptr), c(nullptr);
    EXPECT_EQ(list.oldestSince(), IdleList::kNone);
    list.add(a, 10);
    list.add(b, 20);
    list.add(c, 30);
    EXPECT_EQ(list.oldest(), &a);
    EXPECT_EQ(list.oldestSince(), 10);
    list.add(a, 40);  // already idle: keeps its place and its time
    EXPECT_EQ(list.oldestSince(), 10);
    EXPECT_EQ(list.size(), 3u);
    // Busy again: the next oldest is published.
    list.remove(a);
    EXPECT_EQ(list.oldest(), &b);
    EXPECT_EQ(list.oldestSince(), 20);
    // A middle one leaves without changing the oldest.
    list.remove(c);
    EXPECT_EQ(list.oldestSince(), 20);
    list.remove(c);  // not idle: nothing happens
    // Idle again: last in line.
    list.add(a, 50);
    list.remove(b);
    EXPECT_EQ(list.oldest(), &a);
    EXPECT_EQ(list.oldestSince(), 50);
    list.remove(a);
    EXPECT_EQ(list.oldest(), nullptr);
    EXPECT_EQ(list.oldestSince(), IdleList::kNone);
    EXPECT_EQ(list.size(), 0u);
}

}  // namespace
}  // namespace dpgate::gateway
