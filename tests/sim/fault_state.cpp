#include "fault_state.hpp"

#include <charconv>

#include <nlohmann/json.hpp>

namespace dpgate::sim {

namespace {

struct ModeName {
    FaultMode mode;
    std::string_view name;
};

constexpr ModeName kModeNames[] = {
    {FaultMode::kNone, "none"},           {FaultMode::kRefuse, "refuse"},        {FaultMode::kStatus, "status"},
    {FaultMode::kHang, "hang"},           {FaultMode::kCutStream, "cut_stream"}, {FaultMode::kSlow, "slow"},
    {FaultMode::kUnhealthy, "unhealthy"},
};

bool validStatus(std::int64_t status) { return status >= 400 && status <= 599; }

}  // namespace

std::string_view faultModeName(FaultMode mode) {
    for (const auto& entry : kModeNames) {
        if (entry.mode == mode) return entry.name;
    }
    return "none";
}

std::optional<FaultMode> parseFaultMode(std::string_view name) {
    for (const auto& entry : kModeNames) {
        if (entry.name == name) return entry.mode;
    }
    return std::nullopt;
}

std::optional<FaultConfig> parseFaultJson(std::string_view body, const FaultConfig& current, std::string& error) {
    auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
        error = "fault body must be a JSON object like {\"mode\":\"hang\"}";
        return std::nullopt;
    }
    std::int64_t count_offset = current.count_offset;
    if (auto offset_it = doc.find("count_offset"); offset_it != doc.end()) {
        const bool in_range =
            offset_it->is_number_unsigned()
                ? offset_it->get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxCountOffset)
                : offset_it->is_number_integer() && offset_it->get<std::int64_t>() >= -kMaxCountOffset;
        if (!in_range) {
            error = "fault field \"count_offset\" must be an integer in [-" + std::to_string(kMaxCountOffset) + ", " +
                    std::to_string(kMaxCountOffset) + "]";
            return std::nullopt;
        }
        count_offset = offset_it->get<std::int64_t>();
        if (!doc.contains("mode")) {
            FaultConfig config = current;
            config.count_offset = count_offset;
            return config;
        }
    }
    auto mode_it = doc.find("mode");
    if (mode_it == doc.end() || !mode_it->is_string()) {
        error = "fault body needs a string \"mode\" (or a \"count_offset\")";
        return std::nullopt;
    }
    auto mode = parseFaultMode(mode_it->get<std::string>());
    if (!mode) {
        error = "unknown fault mode \"" + mode_it->get<std::string>() +
                "\"; expected none, refuse, status, hang, cut_stream, slow or unhealthy";
        return std::nullopt;
    }
    FaultConfig config;
    config.mode = *mode;
    config.count_offset = count_offset;
    auto read_uint = [&](const char* key, auto& target) {
        auto it = doc.find(key);
        if (it == doc.end()) return true;
        if (!it->is_number_unsigned()) {
            error = std::string("fault field \"") + key + "\" must be a non-negative integer";
            return false;
        }
        target = it->get<std::uint64_t>();
        return true;
    };
    std::uint64_t status = static_cast<std::uint64_t>(config.status);
    if (!read_uint("status", status) || !read_uint("after_chunks", config.after_chunks) ||
        !read_uint("chunk_delay_ms", config.chunk_delay_ms)) {
        return std::nullopt;
    }
    if (!validStatus(static_cast<std::int64_t>(status))) {
        error = "fault status must be in [400, 599]";
        return std::nullopt;
    }
    config.status = static_cast<int>(status);
    if (auto it = doc.find("close_with_event"); it != doc.end()) {
        if (!it->is_boolean()) {
            error = "fault field \"close_with_event\" must be true or false";
            return std::nullopt;
        }
        config.close_with_event = it->get<bool>();
    }
    return config;
}

std::optional<FaultConfig> parseFaultSpec(std::string_view spec, std::string& error) {
    auto colon = spec.find(':');
    auto mode = parseFaultMode(spec.substr(0, colon));
    if (!mode) {
        error = "unknown fault mode in --fault " + std::string(spec);
        return std::nullopt;
    }
    FaultConfig config;
    config.mode = *mode;
    if (colon == std::string_view::npos) return config;
    auto arg = spec.substr(colon + 1);
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), value);
    if (ec != std::errc{} || end != arg.data() + arg.size()) {
        error = "--fault " + std::string(spec) + ": expected MODE:N with N an integer";
        return std::nullopt;
    }
    switch (*mode) {
        case FaultMode::kStatus:
            if (!validStatus(static_cast<std::int64_t>(value))) {
                error = "--fault status:N needs N in [400, 599]";
                return std::nullopt;
            }
            config.status = static_cast<int>(value);
            break;
        case FaultMode::kCutStream: config.after_chunks = value; break;
        case FaultMode::kSlow: config.chunk_delay_ms = value; break;
        default: error = "--fault " + std::string(spec) + ": this mode takes no argument"; return std::nullopt;
    }
    return config;
}

std::string faultToJson(const FaultConfig& fault) {
    nlohmann::json doc = {
        {"mode", faultModeName(fault.mode)},          {"status", fault.status},
        {"after_chunks", fault.after_chunks},         {"chunk_delay_ms", fault.chunk_delay_ms},
        {"close_with_event", fault.close_with_event},
    };
    if (fault.count_offset != 0) doc["count_offset"] = fault.count_offset;
    return doc.dump();
}

}  // namespace dpgate::sim
