#include "gateway/net/connections_per_address.hpp"

namespace dpgate::gateway {

std::optional<ConnectionsPerAddress::Slot> ConnectionsPerAddress::open(const Address& address, uint32_t cap) {
    if (cap == 0) return Slot();
    Shard& shard = shardOf(address);
    std::lock_guard lock(shard.mutex);
    uint32_t& open = shard.open[address];
    if (open >= cap) return std::nullopt;
    ++open;
    return Slot(this, address);
}

uint32_t ConnectionsPerAddress::count(const Address& address) const {
    const Shard& shard = shardOf(address);
    std::lock_guard lock(shard.mutex);
    auto it = shard.open.find(address);
    return it == shard.open.end() ? 0 : it->second;
}

void ConnectionsPerAddress::close(const Address& address) noexcept {
    Shard& shard = shardOf(address);
    std::lock_guard lock(shard.mutex);
    auto it = shard.open.find(address);
    if (it == shard.open.end()) return;
    if (--it->second == 0) shard.open.erase(it);
}

}  // namespace dpgate::gateway
