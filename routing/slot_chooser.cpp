#include "routing/slot_chooser.hpp"

#include <algorithm>
#include <cassert>

#include "routing/hash64.hpp"

namespace dpgate::routing {
namespace {

constexpr uint64_t slot_id_seed = 0x51075e1ec7ed0001ULL;

uint64_t slotId(const Slot& slot) {
    return Hasher64(slot_id_seed).addField(slot.backend_name).addU64(slot.rank).digest();
}

}  // namespace

SlotChooser::SlotChooser(std::vector<Slot> slots, SlotChooserOptions options)
    : slots_(std::move(slots)), options_(options) {
    slot_ids_.reserve(slots_.size());
    for (const Slot& slot : slots_) slot_ids_.push_back(slotId(slot));
}

uint64_t SlotChooser::score(uint64_t key, size_t slot) const {
    // Two rounds of a full-avalanche mix: keys and slot ids that differ in a
    // single bit still give independent-looking scores.
    return mix64(mix64(key ^ 0xa0761d6478bd642fULL) ^ slot_ids_[slot]);
}

std::vector<size_t> SlotChooser::rendezvousOrder(uint64_t key) const {
    std::vector<std::pair<uint64_t, size_t>> scored;
    scored.reserve(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) scored.emplace_back(score(key, i), i);
    // Ties (2^-64) break on the slot id so the order never depends on config order.
    std::sort(scored.begin(), scored.end(), [this](const auto& a, const auto& b) {
        if (a.first != b.first) return a.first > b.first;
        return slot_ids_[a.second] > slot_ids_[b.second];
    });
    std::vector<size_t> order;
    order.reserve(scored.size());
    for (const auto& entry : scored) order.push_back(entry.second);
    return order;
}

double SlotChooser::loadBound(std::span<const double> loads, double request_load) const {
    double total = request_load;
    for (double load : loads) total += load;
    double mean = slots_.empty() ? 0.0 : total / double(slots_.size());
    return options_.balance_factor * mean + options_.slack_requests * request_load;
}

std::vector<size_t> SlotChooser::preference(uint64_t key, std::span<const double> loads, double request_load) const {
    assert(loads.size() == slots_.size());
    std::vector<size_t> order = rendezvousOrder(key);
    double bound = loadBound(loads, request_load);
    std::stable_partition(order.begin(), order.end(), [&](size_t slot) { return loads[slot] <= bound; });
    return order;
}

size_t SlotChooser::choose(uint64_t key, std::span<const double> loads, double request_load) const {
    assert(!slots_.empty() && loads.size() == slots_.size());
    double bound = loadBound(loads, request_load);
    bool found_within = false;
    size_t best_within = 0, best_any = 0;
    uint64_t score_within = 0, score_any = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
        uint64_t s = score(key, i);
        auto better = [&](uint64_t best_score, size_t best) {
            return s > best_score || (s == best_score && slot_ids_[i] > slot_ids_[best]);
        };
        if (i == 0 || better(score_any, best_any)) score_any = s, best_any = i;
        if (loads[i] <= bound && (!found_within || better(score_within, best_within)))
            score_within = s, best_within = i, found_within = true;
    }
    return found_within ? best_within : best_any;
}

}  // namespace dpgate::routing
