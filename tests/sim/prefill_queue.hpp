#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

namespace dpgate::sim {

// One DP rank's prefill under --serial-prefill, as vLLM's scheduler runs it
// on a saturated rank: first come, first served, `per_token` per uncached
// prompt token. The rank works in steps:
//   - max_batched_tokens 0: a step is the whole prefill of the request at
//     the head, so requests prefill one at a time;
//   - max_batched_tokens N: a step takes up to N tokens, split in FCFS order
//     across the queued requests (each gets what it still needs, or what is
//     left of the budget), and lasts per_token times its tokens, as vLLM's
//     chunked prefill spends max_num_batched_tokens. A request that arrives
//     during a step joins the next one. A prefill ends with its last step.
// Decoding is not modelled here: it takes no budget and overlaps freely.
//
// A request that leaves (its client went away; vLLM aborts it) gives up its
// place at once. Without a budget the rank stops working on it at once; with
// one the step in progress still runs to its end, as vLLM aborts between
// steps.
//
// Pure: every call gets the time; the caller sleeps. Thread-safe.
class PrefillQueue {
public:
    using TimePoint = std::chrono::steady_clock::time_point;
    // Called, without the lock held, when a queued request may finish earlier
    // than doneAt() last said: a request left the queue.
    using Wake = std::function<void()>;

    PrefillQueue(std::chrono::microseconds per_token, std::uint64_t max_batched_tokens);

    // Queues a request with `tokens` uncached prompt tokens; returns its id.
    // A request with none is done at once.
    std::uint64_t add(std::uint64_t tokens, TimePoint now, Wake wake = {});
    // When the request's prefill ends if nobody else arrives or leaves;
    // nullopt once it has ended. An arrival can only delay it when a budget
    // is set (it may share the request's last step); a departure only
    // advances it, and calls the Wake.
    std::optional<TimePoint> doneAt(std::uint64_t id, TimePoint now);
    // Takes the request out, whether its prefill ended or not.
    void remove(std::uint64_t id, TimePoint now);

    struct Snapshot {
        std::uint64_t waiting = 0;        // not yet given a token: vLLM's WAITING
        std::uint64_t prefilling = 0;     // given some: vLLM's RUNNING, still in prefill
        std::uint64_t queued_tokens = 0;  // prompt tokens not yet prefilled
    };
    Snapshot snapshot(TimePoint now);

private:
    struct Entry {
        std::uint64_t id = 0;
        std::uint64_t remaining_tokens = 0;  // as of the current step's start
        std::uint64_t step_tokens = 0;       // of those, in the current step
        bool started = false;
        Wake wake;
    };

    void advance(TimePoint now);
    void startStep(TimePoint start);

    const std::chrono::microseconds per_token_;
    const std::uint64_t max_batched_tokens_;
    std::mutex mutex_;
    std::deque<Entry> entries_;  // arrival order
    bool stepping_ = false;
    TimePoint step_start_{};
    TimePoint step_end_{};
    std::uint64_t next_id_ = 0;
};

}  // namespace dpgate::sim
