#include "conf/config.hpp"

namespace dpgate::conf {

namespace {

std::string format(const std::string& key_path, int line, const std::string& what) {
    std::string message = "conf: ";
    if (!key_path.empty()) message += key_path + ": ";
    if (line > 0) message += "line " + std::to_string(line) + ": ";
    return message + what;
}

}  // namespace

ConfigError::ConfigError(std::string key_path, int line, const std::string& what)
    : std::runtime_error(format(key_path, line, what)), key_path_(std::move(key_path)), line_(line), detail_(what) {}

}  // namespace dpgate::conf
