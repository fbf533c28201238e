// The roles that must survive a restart: which backend is primary, which
// are drained, and the last flips. Kept in `<state.dir>/state.json`,
// written whole and atomically (a temporary file, fsync, rename, fsync of
// the folder), read once at start. Pure but for the two file functions.
#pragma once

#include "conf/config.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::acceptance {

struct FlipEvent {
    std::string who;  // the request's "by", else "admin@<peer address>"
    std::string at;   // UTC, "2026-12-03T18:04:05Z"
    std::string from;
    std::string to;
    bool forced = false;
    std::string record;  // the acceptance record the flip was checked against ("" when forced)

    bool operator==(const FlipEvent&) const = default;
};

struct RoleState {
    std::string model_id;
    std::vector<std::string> backends;  // every configured name, in config order
    std::string primary;                // "" in active-active mode with no primary
    std::vector<std::string> drained;
    std::vector<FlipEvent> flips;  // newest first, at most kKeptFlips
    std::string written_at;

    bool operator==(const RoleState&) const = default;
};

inline constexpr std::string_view kStateFormat = "dpgate-state/1";
inline constexpr size_t kKeptFlips = 20;

std::string stateJson(const RoleState& state);

// " (flipped by WHO at WHEN)" when the newest flip made `primary` the
// primary; "" otherwise. Refusals that name the primary add it.
std::string flippedBy(const std::vector<FlipEvent>& flips, std::string_view primary);

// Nullopt with `error` set for anything that is not a whole state file.
std::optional<RoleState> parseState(std::string_view text, std::string& error);

// Why the state cannot belong to this config (another model, another set
// of backends, a primary or drained name it does not have); "" when it can.
std::string foreignReason(const RoleState& state, const conf::Config& config);

// state.json in `dir`.
std::string stateFilePath(const std::string& dir);

// Creates `dir` when missing, writes `text` to a temporary file beside
// `path`, fsyncs it, renames it over `path` and fsyncs the folder. Returns
// the error; "" on success.
std::string writeFileAtomically(const std::string& path, std::string_view text);

}  // namespace dpgate::acceptance
