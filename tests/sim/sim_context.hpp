#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "connection_registry.hpp"
#include "fault_state.hpp"
#include "prefill_queue.hpp"
#include "prefix_cache.hpp"
#include "real_prompt_counter.hpp"
#include "sim_options.hpp"
#include "sim_stats.hpp"

namespace dpgate::sim {

// Everything the connections share. It must outlive the io_context: when the
// io_context is destroyed it destroys suspended sessions, whose destructors
// still touch the stats and the registry.
struct SimContext {
    explicit SimContext(SimOptions options_in);

    void reset();  // POST /sim/reset: counters and prefix caches
    // Copies the prefill queues' state into the stats' waiting and queued
    // token gauges, before /metrics or /sim/stats reads them.
    void refreshQueueStats();
    // This rank's prefill queue with --serial-prefill, else null.
    PrefillQueue* prefillQueue(int rank) {
        return prefill_queues.empty() ? nullptr : prefill_queues[static_cast<std::size_t>(rank)].get();
    }

    const SimOptions options;
    FaultState faults;
    SimStats stats;
    std::vector<std::unique_ptr<PrefixCache>> caches;           // one per DP rank
    std::vector<std::unique_ptr<PrefillQueue>> prefill_queues;  // one per DP rank, or none
    // Set before serving when --tokenizer is given: prompt tokens are then
    // counted as a real server counts them, else pseudo-tokens.
    std::unique_ptr<RealPromptCounter> real_counter;
    ConnectionRegistry connections;
    std::atomic<std::uint64_t> round_robin{0};
    std::atomic<std::uint64_t> next_request_id{0};
    const std::int64_t started_unix_s;
};

}  // namespace dpgate::sim
