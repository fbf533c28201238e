// Operational log lines on stderr (the access log is separate: access_log.hpp).
#pragma once

#include <string_view>

namespace dpgate::gateway {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

void setLogLevel(LogLevel level);
LogLevel parseLogLevel(std::string_view name);
bool logEnabled(LogLevel level);
void logLine(LogLevel level, std::string_view message);

}  // namespace dpgate::gateway
