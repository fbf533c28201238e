#include "gateway/metrics/sharded_count.hpp"

#include <bitset>
#include <mutex>

namespace dpgate::metrics {
namespace {

std::mutex owners_mutex;
std::bitset<kOwnedShards> owned_cells;

}  // namespace

ShardOwner::ShardOwner() {
    {
        std::lock_guard lock(owners_mutex);
        for (size_t i = 0; i < kOwnedShards; ++i) {
            if (!owned_cells[i]) {
                owned_cells[i] = true;
                index_ = i;
                break;
            }
        }
    }
    if (owns()) shard_detail::current = {index_, true};
}

ShardOwner::~ShardOwner() {
    if (!owns()) return;
    shard_detail::current = {};
    std::lock_guard lock(owners_mutex);
    owned_cells[index_] = false;
}

}  // namespace dpgate::metrics
