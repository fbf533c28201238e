#include "prefill_queue.hpp"

#include <algorithm>
#include <vector>

namespace dpgate::sim {

PrefillQueue::PrefillQueue(std::chrono::microseconds per_token, std::uint64_t max_batched_tokens)
    : per_token_(per_token), max_batched_tokens_(max_batched_tokens) {}

std::uint64_t PrefillQueue::add(std::uint64_t tokens, TimePoint now, Wake wake) {
    std::lock_guard lock(mutex_);
    const std::uint64_t id = next_id_++;
    if (tokens == 0) return id;
    advance(now);
    entries_.push_back(Entry{id, tokens, 0, false, std::move(wake)});
    if (!stepping_) startStep(now);
    return id;
}

std::optional<PrefillQueue::TimePoint> PrefillQueue::doneAt(std::uint64_t id, TimePoint now) {
    std::lock_guard lock(mutex_);
    advance(now);
    auto found = std::find_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; });
    if (found == entries_.end()) return std::nullopt;
    // Tokens left after the current step: those up to and including this
    // request, and all of them.
    std::uint64_t through = 0;
    std::uint64_t total = 0;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const std::uint64_t left = it->remaining_tokens - it->step_tokens;
        total += left;
        if (it <= found) through += left;
    }
    if (through == 0) return step_end_;
    if (max_batched_tokens_ == 0) return step_end_ + per_token_ * static_cast<std::int64_t>(through);
    // Full steps until the one that holds this request's last token, which
    // also carries the tokens behind it up to the budget.
    const std::uint64_t steps = (through + max_batched_tokens_ - 1) / max_batched_tokens_;
    return step_end_ + per_token_ * static_cast<std::int64_t>(std::min(steps * max_batched_tokens_, total));
}

void PrefillQueue::remove(std::uint64_t id, TimePoint now) {
    std::vector<Wake> wakes;
    {
        std::lock_guard lock(mutex_);
        advance(now);
        auto found = std::find_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; });
        if (found == entries_.end()) return;
        const bool aborts_step = max_batched_tokens_ == 0 && found->step_tokens > 0;
        entries_.erase(found);
        if (aborts_step) {
            stepping_ = false;
            startStep(now);
        }
        for (const auto& entry : entries_) {
            if (entry.wake) wakes.push_back(entry.wake);
        }
    }
    for (auto& wake : wakes) wake();
}

PrefillQueue::Snapshot PrefillQueue::snapshot(TimePoint now) {
    std::lock_guard lock(mutex_);
    advance(now);
    Snapshot snapshot;
    std::uint64_t step_tokens = 0;
    for (const auto& entry : entries_) {
        ++(entry.started ? snapshot.prefilling : snapshot.waiting);
        snapshot.queued_tokens += entry.remaining_tokens;
        step_tokens += entry.step_tokens;
    }
    // The current step's share already done, pro rata.
    if (stepping_ && step_end_ > step_start_) {
        const double done = std::chrono::duration<double>(now - step_start_) / (step_end_ - step_start_);
        snapshot.queued_tokens -= static_cast<std::uint64_t>(static_cast<double>(step_tokens) * done);
    }
    return snapshot;
}

void PrefillQueue::advance(TimePoint now) {
    while (stepping_ && step_end_ <= now) {
        for (auto& entry : entries_) {
            entry.remaining_tokens -= entry.step_tokens;
            entry.step_tokens = 0;
        }
        std::erase_if(entries_, [](const Entry& e) { return e.remaining_tokens == 0; });
        stepping_ = false;
        startStep(step_end_);
    }
}

void PrefillQueue::startStep(TimePoint start) {
    if (entries_.empty()) return;
    std::uint64_t budget = max_batched_tokens_ == 0 ? entries_.front().remaining_tokens : max_batched_tokens_;
    std::uint64_t step_tokens = 0;
    for (auto& entry : entries_) {
        if (budget == 0) break;
        entry.step_tokens = std::min(entry.remaining_tokens, budget);
        entry.started = true;
        budget -= entry.step_tokens;
        step_tokens += entry.step_tokens;
    }
    stepping_ = true;
    step_start_ = start;
    step_end_ = start + per_token_ * static_cast<std::int64_t>(step_tokens);
}

}  // namespace dpgate::sim
