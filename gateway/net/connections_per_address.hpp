// Open client connections per peer address, shared by every worker, against
// limits.max_connections_per_ip: one address cannot take all of
// max_connections.
//
// The table holds only addresses with a connection open (bounded by
// max_connections), in shards with a lock each: a connection's open and
// close take one shard's lock, never a request.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace dpgate::gateway {

class ConnectionsPerAddress {
public:
    // An IPv6 address, or an IPv4 one in its v4-mapped form (::ffff:a.b.c.d),
    // so that a dual-stack listener counts both spellings as one.
    using Address = std::array<uint8_t, 16>;

    // One connection counted; uncounted on destruction. An empty slot counts
    // nothing (the cap was off when the connection came).
    class Slot {
    public:
        Slot() = default;
        Slot(Slot&& other) noexcept : table_(std::exchange(other.table_, nullptr)), address_(other.address_) {}
        Slot& operator=(Slot&& other) noexcept {
            if (this != &other) {
                release();
                table_ = std::exchange(other.table_, nullptr);
                address_ = other.address_;
            }
            return *this;
        }
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;
        ~Slot() { release(); }

        bool counted() const { return table_ != nullptr; }

    private:
        friend class ConnectionsPerAddress;
        Slot(ConnectionsPerAddress* table, const Address& address) : table_(table), address_(address) {}
        void release() noexcept {
            if (table_) table_->close(address_);
            table_ = nullptr;
        }

        ConnectionsPerAddress* table_ = nullptr;
        Address address_{};
    };

    ConnectionsPerAddress() = default;
    ConnectionsPerAddress(const ConnectionsPerAddress&) = delete;
    ConnectionsPerAddress& operator=(const ConnectionsPerAddress&) = delete;

    // A slot for one more connection from `address`, or nullopt when it has
    // `cap` open already. cap 0: no cap, and an empty slot.
    std::optional<Slot> open(const Address& address, uint32_t cap);

    // Connections open from `address` now (tests, the status page).
    uint32_t count(const Address& address) const;

private:
    struct Hash {
        size_t operator()(const Address& a) const noexcept {
            return std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(a.data()), a.size()));
        }
    };
    struct alignas(64) Shard {
        mutable std::mutex mutex;
        std::unordered_map<Address, uint32_t, Hash> open;
    };
    static constexpr size_t kShards = 16;

    Shard& shardOf(const Address& address) { return shards_[Hash()(address) % kShards]; }
    const Shard& shardOf(const Address& address) const { return shards_[Hash()(address) % kShards]; }
    void close(const Address& address) noexcept;

    std::array<Shard, kShards> shards_;
};

}  // namespace dpgate::gateway
