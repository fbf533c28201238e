#include "sim_context.hpp"

#include <chrono>

#include "prompt_hasher.hpp"

namespace dpgate::sim {

SimContext::SimContext(SimOptions options_in)
    : options(std::move(options_in)),
      faults(options.fault),
      stats(options.dp_ranks),
      started_unix_s(
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
              .count()) {
    for (int r = 0; r < options.dp_ranks; ++r) {
        caches.push_back(std::make_unique<PrefixCache>(options.cache_tokens / PromptHasher::kBlockTokens));
        if (options.serial_prefill) {
            prefill_queues.push_back(std::make_unique<PrefillQueue>(
                std::chrono::microseconds(options.prefill_us_per_token), options.max_batched_tokens));
        }
    }
}

void SimContext::reset() {
    stats.reset();
    for (auto& cache : caches) cache->clear();
}

void SimContext::refreshQueueStats() {
    const auto now = std::chrono::steady_clock::now();
    for (std::size_t r = 0; r < prefill_queues.size(); ++r) {
        auto snapshot = prefill_queues[r]->snapshot(now);
        auto& counters = stats.rank(static_cast<int>(r));
        counters.waiting = static_cast<std::int64_t>(snapshot.waiting);
        counters.queued_prefill_tokens = snapshot.queued_tokens;
    }
}

}  // namespace dpgate::sim
