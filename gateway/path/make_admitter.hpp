// The Admitters of a gateway process: one per worker for what is quick to
// judge, one per admission pool thread for the rest (admission_pool.hpp).
#pragma once

#include "admission/admit.hpp"
#include "admission/tokenizer/shared_segment_cache.hpp"
#include "conf/config.hpp"

#include <cstddef>
#include <memory>

namespace dpgate::gateway {

struct ModelFiles;

enum class AdmitterRole { worker, pool };

// An Admitter for one thread. Its count caches are sized from
// model.count_cache_bytes: half of the bound is the cache every thread
// shares (`shared_segments`); of the other half the workers' Admitters get
// a quarter and the pool's three quarters (split over `admission_threads`),
// as long conversations are judged in the pool and need the room (a
// sixty-fourth when offloading is off at start: a reload may turn it on).
std::unique_ptr<admission::Admitter> makeAdmitter(const conf::Config& config, const ModelFiles& model,
                                                  const std::shared_ptr<admission::SharedSegmentCache>& shared_segments,
                                                  size_t admission_threads, AdmitterRole role);

}  // namespace dpgate::gateway
