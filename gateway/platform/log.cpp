#include "gateway/platform/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace dpgate::gateway {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};
constexpr const char* kNames[] = {"error", "warn", "info", "debug"};
}  // namespace

void setLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

LogLevel parseLogLevel(std::string_view name) {
    for (int i = 0; i < 4; ++i)
        if (name == kNames[i]) return static_cast<LogLevel>(i);
    return LogLevel::info;
}

bool logEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed); }

void logLine(LogLevel level, std::string_view message) {
    if (!logEnabled(level)) return;
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::string line = std::string(stamp) + "." + std::to_string(1000 + millis).substr(1) + "Z dpgate " +
                       kNames[static_cast<int>(level)] + ": " + std::string(message) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);  // one write per line: lines from threads never interleave
}

}  // namespace dpgate::gateway
