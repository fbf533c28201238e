#include "gateway/net/connections_per_address.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace dpgate::gateway {
namespace {

ConnectionsPerAddress::Address address(uint8_t last) {
    ConnectionsPerAddress::Address a{};
    a[10] = a[11] = 0xff;  // ::ffff:127.0.0.x
    a[12] = 127;
    a[15] = last;
    return a;
}

TEST(ConnectionsPerAddress, CapsEachAddressOnItsOwn) {
    ConnectionsPerAddress table;
    std::vector<ConnectionsPerAddress::Slot> held;
    for (int i = 0; i < 3; ++i) {
        std::optional<ConnectionsPerAddress::Slot> slot = table.open(address(1), 3);
        ASSERT_TRUE(slot && slot->counted());
        held.push_back(std::move(*slot));
    }
    EXPECT_FALSE(table.open(address(1), 3)) << "a fourth from the same address";
    EXPECT_TRUE(table.open(address(2), 3)) << "another address has its own count";
    EXPECT_EQ(table.count(address(1)), 3u);
    held.pop_back();
    EXPECT_EQ(table.count(address(1)), 2u);
    EXPECT_TRUE(table.open(address(1), 3)) << "a closed connection frees its place";
}

TEST(ConnectionsPerAddress, NoCapCountsNothing) {
    ConnectionsPerAddress table;
    std::optional<ConnectionsPerAddress::Slot> slot = table.open(address(1), 0);
    ASSERT_TRUE(slot);
    EXPECT_FALSE(slot->counted());
    EXPECT_EQ(table.count(address(1)), 0u);
    // A connection taken while the cap was off is not uncounted when the cap comes on.
    std::optional<ConnectionsPerAddress::Slot> capped = table.open(address(1), 1);
    ASSERT_TRUE(capped);
    slot.reset();
    EXPECT_EQ(table.count(address(1)), 1u);
}

TEST(ConnectionsPerAddress, AnAddressLeavesTheTableWithItsLastConnection) {
    ConnectionsPerAddress table;
    {
        std::optional<ConnectionsPerAddress::Slot> slot = table.open(address(7), 1);
        ConnectionsPerAddress::Slot moved = std::move(*slot);
        slot.reset();  // the moved-from slot counts nothing
        EXPECT_EQ(table.count(address(7)), 1u);
    }
    EXPECT_EQ(table.count(address(7)), 0u);
    EXPECT_TRUE(table.open(address(7), 1));
}

}  // namespace
}  // namespace dpgate::gateway
