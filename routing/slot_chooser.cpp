#include "routing/slot_chooser.hpp"

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <cassert>

#include "routing/hash64.hpp"

namespace dpgate::routing {
namespace {

constexpr uint64_t slot_id_seed = 0x51075e1ec7ed0001ULL;

}  // namespace

uint64_t SlotChooser::slotIdOf(const Slot& slot) {
    return Hasher64(slot_id_seed).addField(slot.backend_name).addU64(slot.rank).digest();
}

SlotChooser::SlotChooser(std::vector<Slot> slots, SlotChooserOptions options)
    : slots_(std::move(slots)), options_(options) {
    slot_ids_.reserve(slots_.size());
    for (const Slot& slot : slots_) slot_ids_.push_back(slotIdOf(slot));
}

uint64_t SlotChooser::score(uint64_t key, size_t slot) const {
    // Two rounds of a full-avalanche mix: keys and slot ids that differ in a
    // single bit still give independent-looking scores.
    return mix64(mix64(key ^ 0xa0761d6478bd642fULL) ^ slot_ids_[slot]);
}

bool SlotChooser::ahead(uint64_t key, size_t a, size_t b) const {
    uint64_t sa = score(key, a), sb = score(key, b);
    // Ties (2^-64) break on the slot id so the order never depends on config order.
    return sa > sb || (sa == sb && slot_ids_[a] > slot_ids_[b]);
}

size_t SlotChooser::home(uint64_t key) const {
    size_t best = 0;
    for (size_t i = 1; i < slots_.size(); ++i)
        if (ahead(key, i, best)) best = i;
    return best;
}

std::vector<size_t> SlotChooser::rendezvousOrder(uint64_t key) const {
    boost::container::small_vector<std::pair<uint64_t, size_t>, 16> scored;
    for (size_t i = 0; i < slots_.size(); ++i) scored.emplace_back(score(key, i), i);
    std::sort(scored.begin(), scored.end(), [this](const auto& a, const auto& b) {
        if (a.first != b.first) return a.first > b.first;
        return slot_ids_[a.second] > slot_ids_[b.second];
    });
    std::vector<size_t> order;
    order.reserve(scored.size());
    for (const auto& entry : scored) order.push_back(entry.second);
    return order;
}

double SlotChooser::loadBound(const RouteRequest& request, size_t home_slot) const {
    double total = request.uncached_tokens[home_slot];
    for (double load : request.loads) total += load;
    double mean = slots_.empty() ? 0.0 : total / double(slots_.size());
    return options_.balance_factor * mean + options_.slack_requests * request.prompt_tokens + options_.slack_tokens;
}

size_t SlotChooser::anchor(const RouteRequest& request) const {
    assert(!slots_.empty() && request.loads.size() == slots_.size() && request.uncached_tokens.size() == slots_.size());
    if (request.last_slot && *request.last_slot < slots_.size()) return *request.last_slot;
    const size_t h = home(request.key);
    const auto& work = request.work;
    if (options_.work_factor <= 0 || work.size() != slots_.size()) return h;
    double mean = 0;
    for (double w : work) mean += w;
    mean /= double(slots_.size());
    const double work_bound = options_.work_factor * mean + options_.work_slack_tokens;
    const double idle = options_.slack_requests * request.prompt_tokens + options_.slack_tokens;
    if (work[h] <= work_bound && request.loads[h] <= idle) return h;
    size_t best = slots_.size();
    for (size_t c : rendezvousOrder(request.key)) {
        if (work[c] > work_bound) continue;
        if (best == slots_.size() ||
            request.loads[c] + request.uncached_tokens[c] < request.loads[best] + request.uncached_tokens[best])
            best = c;
    }
    if (best != slots_.size()) return best;
    // Nothing within the work bound (work_factor < 1): the least worked.
    best = h;
    for (size_t c = 0; c < slots_.size(); ++c)
        if (work[c] < work[best]) best = c;
    return best;
}

size_t SlotChooser::choose(const RouteRequest& request) const {
    const size_t a = anchor(request);
    return chooseAround(request, a, loadBound(request, a));
}

size_t SlotChooser::chooseAround(const RouteRequest& request, size_t a, double bound) const {
    const auto& loads = request.loads;
    const auto& uncached = request.uncached_tokens;
    if (loads[a] <= bound) return a;

    size_t best = a;
    for (size_t c = 0; c < slots_.size(); ++c) {
        if (c == a || loads[c] > bound) continue;
        if (best == a) {
            best = c;
            continue;
        }
        double cost = loads[c] + uncached[c], best_cost = loads[best] + uncached[best];
        if (cost < best_cost || (cost == best_cost && ahead(request.key, c, best))) best = c;
    }
    // Leaving costs the prefix cached at the anchor; stay when it buys nothing.
    if (best != a && loads[a] + uncached[a] <= loads[best] + uncached[best]) return a;
    return best;  // the anchor when nothing is within the bound (balance_factor < 1)
}

std::vector<size_t> SlotChooser::preference(const RouteRequest& request) const {
    const size_t a = anchor(request);
    const double bound = loadBound(request, a);
    const size_t chosen = chooseAround(request, a, bound);
    std::vector<size_t> order = rendezvousOrder(request.key);
    std::stable_partition(order.begin(), order.end(), [&](size_t slot) { return request.loads[slot] <= bound; });
    auto at = std::find(order.begin(), order.end(), chosen);
    std::rotate(order.begin(), at, at + 1);
    return order;
}

std::vector<size_t> SlotChooser::preference(uint64_t key, std::span<const double> loads, double request_load) const {
    std::vector<double> uncached(slots_.size(), request_load);
    return preference(RouteRequest{key, loads, uncached, request_load, {}, std::nullopt});
}

size_t SlotChooser::choose(uint64_t key, std::span<const double> loads, double request_load) const {
    std::vector<double> uncached(slots_.size(), request_load);
    return choose(RouteRequest{key, loads, uncached, request_load, {}, std::nullopt});
}

double SlotChooser::loadBound(std::span<const double> loads, double request_load) const {
    double total = request_load;
    for (double load : loads) total += load;
    double mean = slots_.empty() ? 0.0 : total / double(slots_.size());
    return options_.balance_factor * mean + options_.slack_requests * request_load + options_.slack_tokens;
}

}  // namespace dpgate::routing
