// The Admitters of a gateway process: one per worker for what is quick to
// judge, one per admission pool thread for the rest (admission_pool.hpp).
#pragma once

#include "admission/admit.hpp"

#include <cstddef>
#include <memory>

namespace dpgate::gateway {

class Server;

enum class AdmitterRole { worker, pool };

// An Admitter for one thread. Its count caches are sized from
// model.count_cache_bytes: half of the bound is the cache every thread
// shares (Server::sharedSegments); of the other half the workers' Admitters
// get a quarter and the pool's three quarters, as long conversations are
// judged in the pool and need the room (a sixty-fourth when offloading is
// off at start: a reload may turn it on).
std::unique_ptr<admission::Admitter> makeAdmitter(const Server& server, AdmitterRole role);

}  // namespace dpgate::gateway
