// `dpgate ctl status`: the compact table an operator reads instead of the
// ~200 lines of /admin/status JSON. Pure (JSON in, lines out), so the unit
// tests pin its layout without a gateway.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace dpgate::gateway::ctl {

// The lines of the table, without newlines: a header (model, windows,
// roles, last flip, and a loud line when failover went to an unaccepted
// standby), one row per backend, then one row per (backend, rank). A field
// that is null or absent shows as "-". Never throws on a JSON of another
// shape: what it cannot read shows as "-".
std::vector<std::string> statusTable(const nlohmann::json& status);

// `dpgate ctl usage`: /admin/usage as lines: the store, then one row per
// key, the keys that used most today first (tokens today, then in the last
// minute), with its budgets ("-": none). TODAY says whose count it is:
// `shared` (every replica's, from Redis) or `replica` (this one's).
std::vector<std::string> usageTable(const nlohmann::json& usage);

// One JSON value as a table cell: null "-", true "yes", false "no", a
// whole number without decimals (2.0 is "2"), any other number with three,
// a string as it is ("-" when empty).
std::string cellText(const nlohmann::json& value);

// A ratio (KV cache usage, cache hit ratio): always three decimals.
std::string ratioText(const nlohmann::json& value);

}  // namespace dpgate::gateway::ctl
