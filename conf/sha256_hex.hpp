// SHA-256 as lowercase hex: how API keys and the admin token are stored, so
// that a config file or a leaked Config never holds a usable secret.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dpgate::conf {

std::string sha256Hex(std::string_view data);

// 64 hex digits in either case -> lowercase; nullopt otherwise.
std::optional<std::string> normalizeSha256Hex(std::string_view text);

}  // namespace dpgate::conf
