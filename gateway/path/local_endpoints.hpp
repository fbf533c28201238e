// Answers dpgate gives itself, without a backend: /health and /v1/models.
#pragma once

#include "conf/config.hpp"
#include "gateway/backends/backend_registry.hpp"

#include <string>

namespace dpgate::gateway {

// {"status":"ok"|"unavailable","backends":[{name,role,healthy,...}]}; 200
// while at least one backend is routable, else 503.
std::pair<unsigned, std::string> healthBody(const BackendRegistry& backends);

// vLLM's shape, with max_model_len = the public window.
std::string modelsBody(const conf::ModelConfig& model, uint64_t public_window);

}  // namespace dpgate::gateway
