#include "gateway/acceptance/writable_dir.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace dpgate::acceptance {

std::string writableDirProblem(const std::string& dir, const std::string& key) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return key + ": " + dir + ": cannot create the folder: " + ec.message();
    if (!std::filesystem::is_directory(dir, ec)) return key + ": " + dir + ": not a folder";
    // A real file, not access(2): it answers for this process's user, its
    // capabilities, read-only mounts and a full disk alike.
    const std::string probe =
        (std::filesystem::path(dir) / (".dpgate-write-check." + std::to_string(::getpid()))).string();
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return key + ": " + dir + ": cannot write in it: " + std::strerror(errno);
    const bool written = ::write(fd, "x", 1) == 1;
    const int write_errno = errno;
    ::close(fd);
    ::unlink(probe.c_str());
    if (!written) return key + ": " + dir + ": cannot write in it: " + std::strerror(write_errno);
    return {};
}

}  // namespace dpgate::acceptance
