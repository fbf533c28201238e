// Helpers shared by the conf unit tests.
#pragma once

#include "conf/config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace dpgate::conf::test {

// The smallest valid config; tests append to it or replace it.
inline constexpr const char* minimal_backends =
    "backends:\n"
    "  - {name: a, url: \"http://h:1\"}\n";

// The full ConfigError message, or "no error".
inline std::string errorOf(const std::string& yaml, const std::string& base_dir = ".",
                           LoadOptions options = {.check_files = false}) {
    try {
        loadConfigText(yaml, base_dir, options);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "no error";
}

// A fresh folder under the system temp dir, removed at the end of the test.
class TempDir {
public:
    TempDir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = std::filesystem::temp_directory_path() / ("dpgate_conf_" + std::string(info->test_suite_name()) + "_" +
                                                          info->name() + "_" + std::to_string(::getpid()));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    std::string path() const { return path_.string(); }
    std::string write(const std::string& name, const std::string& text) const {
        const auto file = path_ / name;
        std::ofstream(file, std::ios::binary) << text;
        return file.string();
    }

private:
    std::filesystem::path path_;
};

}  // namespace dpgate::conf::test
