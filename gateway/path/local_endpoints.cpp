#include "gateway/path/local_endpoints.hpp"

#include <nlohmann/json.hpp>

#include <ctime>

namespace dpgate::gateway {

std::pair<unsigned, std::string> healthBody(const BackendRegistry& backends) {
    nlohmann::json list = nlohmann::json::array();
    for (const BackendView& b : backends.snapshot())
        list.push_back({{"name", b.name},
                        {"role", conf::toString(b.role)},
                        {"health", toString(b.health)},
                        {"healthy", b.healthy},
                        {"drained", b.drained}});
    bool ok = backends.anyRoutable();
    nlohmann::json body = {{"status", ok ? "ok" : "unavailable"},
                           {"public_window", backends.publicWindow()},
                           {"backends", std::move(list)}};
    return {ok ? 200u : 503u, body.dump() + "\n"};
}

std::string modelsBody(const conf::ModelConfig& model, uint64_t public_window) {
    static const std::time_t started = std::time(nullptr);
    nlohmann::json data = nlohmann::json::array();
    auto entry = [&](const std::string& id) {
        data.push_back({{"id", id},
                        {"object", "model"},
                        {"created", started},
                        {"owned_by", "dpgate"},
                        {"root", model.id},
                        {"max_model_len", public_window}});
    };
    entry(model.id);
    for (const auto& alias : model.aliases) entry(alias);
    return nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump() + "\n";
}

}  // namespace dpgate::gateway
