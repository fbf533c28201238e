#include "gateway/ops/status_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dpgate::gateway::ctl {
namespace {

const nlohmann::json& field(const nlohmann::json& object, const char* key) {
    static const nlohmann::json kNull;
    if (!object.is_object()) return kNull;
    auto it = object.find(key);
    return it == object.end() ? kNull : *it;
}

const nlohmann::json& items(const nlohmann::json& array) {
    static const nlohmann::json kEmpty = nlohmann::json::array();
    return array.is_array() ? array : kEmpty;
}

// Columns padded to their widest cell, two spaces apart, no trailing blanks.
std::vector<std::string> alignColumns(const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> widths;
    for (const auto& row : rows)
        for (size_t c = 0; c < row.size(); ++c) {
            if (widths.size() <= c) widths.push_back(0);
            widths[c] = std::max(widths[c], row[c].size());
        }
    std::vector<std::string> lines;
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
        }
        lines.push_back(std::move(line));
    }
    return lines;
}

// The cells of an array, `separator` between them (appends: GCC 12 warns
// falsely about `"" + std::string&&` at -O3).
std::string joined(const nlohmann::json& array, const char* separator) {
    std::string text;
    for (const nlohmann::json& item : items(array)) {
        if (!text.empty()) text.append(separator);
        text.append(cellText(item));
    }
    return text;
}

// "unknown" (no probe verdict yet) is not "down"; a gateway older than the
// "health" field says it with "probed" and "healthy".
std::string health(const nlohmann::json& backend) {
    const nlohmann::json& named = field(backend, "health");
    if (named == "unknown") return "not probed yet (unknown)";
    if (named.is_string()) return cellText(named);
    const nlohmann::json& healthy = field(backend, "healthy");
    if (!healthy.is_boolean()) return "-";
    if (field(backend, "probed") == false) return "not probed yet (unknown)";
    return healthy.get<bool>() ? "healthy" : "down";
}

std::string state(const nlohmann::json& backend) {
    if (field(backend, "drained") == true) return "drained";
    const nlohmann::json& routable = field(backend, "routable");
    if (!routable.is_boolean()) return "-";
    return routable.get<bool>() ? "routable" : "unroutable";
}

std::string identity(const nlohmann::json& backend) {
    const nlohmann::json& id = field(backend, "identity");
    if (!id.is_object()) return "-";
    return cellText(field(id, "version")) + " " + cellText(field(id, "server"));
}

// "TIME PASS identity ok" or "TIME FAIL(check,...) identity differs (...)".
std::string acceptance(const nlohmann::json& backend) {
    const nlohmann::json& a = field(backend, "acceptance");
    if (!a.is_object()) return "none";
    std::string text = cellText(field(a, "time")) + " ";
    const nlohmann::json& passed = field(a, "passed");
    if (passed == true) text += "PASS";
    else if (passed == false) text += "FAIL";
    else text += "-";
    std::string failed = joined(field(a, "failed"), ",");
    if (!failed.empty()) text += "(" + failed + ")";
    const nlohmann::json& match = field(a, "identity_match");
    if (match == true) {
        text += " identity ok";
    } else if (match == false) {
        std::string differences = joined(field(a, "identity_differences"), "; ");
        text += " IDENTITY DIFFERS";
        if (!differences.empty()) text.append(" (").append(differences).append(")");
    }
    return text;
}

std::string lastFlip(const nlohmann::json& flip) {
    if (!flip.is_object()) return "none";
    std::string text = cellText(field(flip, "at")) + " " + cellText(field(flip, "from")) + " -> " +
                       cellText(field(flip, "to")) + " by " + cellText(field(flip, "who"));
    if (field(flip, "forced") == true) text += " (forced)";
    return text;
}

// "control etcd revision 42 (applied 2026-12-07T18:00:00Z), reachable" or
// "control local (state.dir)"; a loud line when etcd cannot be reached.
void controlLines(const nlohmann::json& status, std::vector<std::string>& lines) {
    const nlohmann::json& control = field(status, "control");
    if (!control.is_object()) return;
    if (field(control, "store") != "etcd") {
        lines.push_back("control local (each replica its own roles)");
        return;
    }
    lines.push_back("control etcd " + cellText(field(control, "prefix")) + " revision " +
                    cellText(field(control, "revision")) + " (applied " + cellText(field(control, "applied_at")) +
                    ", roles from " + cellText(field(control, "source")) + ")  replica " +
                    cellText(field(control, "replica_id")));
    if (field(control, "reachable") == false)
        lines.push_back("!! ETCD UNREACHABLE: serving with the roles last applied; flips and drains are refused (" +
                        cellText(field(control, "last_error")) + ")");
}

// One row per replica; LAGGING when it has not applied the newest roles,
// OTHER CONFIG when its shared config digest is not this replica's.
void replicaRows(const nlohmann::json& status, std::vector<std::string>& lines) {
    const nlohmann::json& replicas = items(field(status, "replicas"));
    if (replicas.empty()) return;
    std::vector<std::vector<std::string>> rows = {
        {"REPLICA", "VERSION", "CONFIG", "PRIMARY", "REVISION", "BACKENDS_UP", "LAST_SEEN", "FLAGS"}};
    for (const nlohmann::json& r : replicas) {
        std::string flags;
        auto flag = [&flags](const char* text) { flags.append(flags.empty() ? "" : ",").append(text); };
        if (field(r, "self") == true) flag("this one");
        if (field(r, "lagging") == true) flag("LAGGING");
        if (field(r, "other_config") == true) flag("OTHER CONFIG");
        std::string digest = cellText(field(r, "config_digest"));
        if (digest.size() > 12) digest.resize(12);
        std::string up = joined(field(r, "backends_up"), ",");
        rows.push_back({cellText(field(r, "id")), cellText(field(r, "version")), digest, cellText(field(r, "primary")),
                        cellText(field(r, "revision")), up.empty() ? "none" : up, cellText(field(r, "last_seen")),
                        flags.empty() ? "-" : flags});
    }
    for (std::string& line : alignColumns(rows)) lines.push_back(std::move(line));
    lines.push_back("");
}

}  // namespace

std::string ratioText(const nlohmann::json& value) {
    if (!value.is_number()) return cellText(value);
    char text[64];
    std::snprintf(text, sizeof text, "%.3f", value.get<double>());
    return text;
}

std::string cellText(const nlohmann::json& value) {
    if (value.is_null()) return "-";
    if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
    if (value.is_number_integer()) return value.dump();
    if (value.is_number_float()) {
        // vLLM's gauges are floats even when they count requests.
        double number = value.get<double>();
        char text[64];
        if (std::isfinite(number) && std::abs(number) < 1e15 && number == std::floor(number))
            std::snprintf(text, sizeof text, "%.0f", number);
        else std::snprintf(text, sizeof text, "%.3f", number);
        return text;
    }
    if (value.is_string()) {
        const std::string& text = value.get_ref<const std::string&>();
        return text.empty() ? "-" : text;
    }
    return value.dump();
}

std::vector<std::string> statusTable(const nlohmann::json& status) {
    std::vector<std::string> lines;
    lines.push_back("model " + cellText(field(status, "model")) + "  public window " +
                    cellText(field(status, "public_window")) + " (configured " +
                    cellText(field(status, "configured_window")) + ")  routing " +
                    cellText(field(status, "routing_mode")));
    const nlohmann::json& roles = field(status, "roles");
    std::string roles_line = "roles from " + cellText(field(roles, "source")) + " since " +
                             cellText(field(roles, "since")) + "  last flip " + lastFlip(field(status, "last_flip"));
    lines.push_back(roles_line);
    if (const nlohmann::json& error = field(roles, "last_write_error"); !error.is_null())
        lines.push_back("!! roles not persisted: " + cellText(error));
    controlLines(status, lines);
    const nlohmann::json& failover = field(status, "failover_unaccepted");
    if (failover.is_object()) {
        const nlohmann::json& who = field(failover, "backend");
        std::string names = who.is_array() ? joined(who, ",") : cellText(who);
        lines.push_back(std::string("!! FAILOVER TO UNACCEPTED STANDBY ") + names +
                        (field(failover, "blocked") == true ? " (BLOCKED)" : "") + " at " +
                        cellText(field(failover, "at")) + ": " + cellText(field(failover, "message")));
    }
    lines.push_back("");

    const nlohmann::json& backends = items(field(status, "backends"));
    std::vector<std::vector<std::string>> rows = {
        {"BACKEND", "ROLE", "HEALTH", "STATE", "WINDOW", "ACCEPTED", "IDENTITY", "ACCEPTANCE"}};
    for (const nlohmann::json& b : backends) {
        std::string accepted = cellText(field(b, "accepted_window"));
        if (field(b, "accepted") == false) accepted = "no";
        rows.push_back({cellText(field(b, "name")), cellText(field(b, "role")), health(b), state(b),
                        cellText(field(b, "window")), accepted, identity(b), acceptance(b)});
    }
    for (std::string& line : alignColumns(rows)) lines.push_back(std::move(line));
    lines.push_back("");
    replicaRows(status, lines);

    // A slot's in-flight count is shown when the API reports one.
    bool in_flight = false;
    for (const nlohmann::json& b : backends)
        for (const nlohmann::json& slot : items(field(b, "slots")))
            if (slot.is_object() && slot.contains("in_flight")) in_flight = true;
    std::vector<std::string> header = {"BACKEND", "RANK"};
    if (in_flight) header.push_back("IN_FLIGHT");
    for (const char* name : {"QUEUED_PREFILL", "RECENT_PREFILL", "RUNNING", "WAITING", "KV_USAGE", "CACHE_HIT"})
        header.push_back(name);
    rows = {header};
    for (const nlohmann::json& b : backends)
        for (const nlohmann::json& slot : items(field(b, "slots"))) {
            std::vector<std::string> row = {cellText(field(b, "name")), cellText(field(slot, "rank"))};
            if (in_flight) row.push_back(cellText(field(slot, "in_flight")));
            for (const char* key : {"queued_prefill_tokens", "recent_prefill_tokens", "running", "waiting"})
                row.push_back(cellText(field(slot, key)));
            for (const char* key : {"kv_cache_usage", "prefix_cache_hit_ratio"})
                row.push_back(ratioText(field(slot, key)));
            rows.push_back(std::move(row));
        }
    for (std::string& line : alignColumns(rows)) lines.push_back(std::move(line));
    return lines;
}

namespace {

uint64_t count(const nlohmann::json& object, const char* key) {
    const nlohmann::json& value = field(object, key);
    return value.is_number_unsigned() ? value.get<uint64_t>() : 0;
}

std::string limitText(const nlohmann::json& limits, const char* key) {
    const uint64_t value = count(limits, key);
    return value == 0 ? "-" : std::to_string(value);
}

}  // namespace

std::vector<std::string> usageTable(const nlohmann::json& usage) {
    std::vector<std::string> lines;
    const nlohmann::json& store = field(usage, "store");
    std::string head = "budgets in " + cellText(field(store, "store"));
    if (field(store, "store") == "redis") {
        head += " " + cellText(field(store, "address")) +
                (field(store, "reachable") == true ? " (up)" : " (AWAY: " + cellText(field(store, "error")) + ")");
        head += "  on_store_unavailable " + cellText(field(store, "on_store_unavailable"));
    }
    head += "  UTC day " + cellText(field(usage, "day"));
    lines.push_back(head);
    lines.push_back("");
    std::vector<const nlohmann::json*> keys;
    for (const nlohmann::json& k : items(field(usage, "keys"))) keys.push_back(&k);
    std::stable_sort(keys.begin(), keys.end(), [](const nlohmann::json* a, const nlohmann::json* b) {
        const uint64_t ta = count(field(*a, "today"), "tokens"), tb = count(field(*b, "today"), "tokens");
        if (ta != tb) return ta > tb;
        return count(field(*a, "last_minute"), "tokens") > count(field(*b, "last_minute"), "tokens");
    });
    std::vector<std::vector<std::string>> rows = {{"KEY", "TOKENS/1M", "REQ/1M", "TOKENS TODAY", "REQ TODAY", "TODAY",
                                                   "TOKENS/MIN", "TOKENS/DAY", "REQ/MIN", "REQ/DAY"}};
    for (const nlohmann::json* k : keys) {
        const nlohmann::json& limits = field(*k, "limits");
        const nlohmann::json& today = field(*k, "today");
        const nlohmann::json& minute = field(*k, "last_minute");
        rows.push_back({cellText(field(*k, "key")), std::to_string(count(minute, "tokens")),
                        std::to_string(count(minute, "requests")), std::to_string(count(today, "tokens")),
                        std::to_string(count(today, "requests")), cellText(field(today, "scope")),
                        limitText(limits, "tokens_per_min"), limitText(limits, "tokens_per_day"),
                        limitText(limits, "requests_per_min"), limitText(limits, "requests_per_day")});
    }
    for (std::string& line : alignColumns(rows)) lines.push_back(std::move(line));
    return lines;
}

}  // namespace dpgate::gateway::ctl
