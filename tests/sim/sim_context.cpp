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
    }
}

void SimContext::reset() {
    stats.reset();
    for (auto& cache : caches) cache->clear();
}

}  // namespace dpgate::sim
