// A real redis-server for the tests, as a child process on a loopback port:
// no persistence, killed with the test (and with the test program, should it
// die first).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dpgate::gateway::redis::test {

// A fresh folder under the system temp dir, removed with the object.
class TempDir {
public:
    explicit TempDir(const std::string& name) {
        path_ = std::filesystem::temp_directory_path() / ("dpgate_redis_" + name + "_" + std::to_string(::getpid()));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    std::string path() const { return path_.string(); }
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(file(name), std::ios::binary) << text;
        return file(name);
    }

private:
    std::filesystem::path path_;
};

// A port nothing listens on right now (the kernel's pick for port 0).
inline uint16_t freePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
        ::close(fd);
        throw std::runtime_error("no free port");
    }
    ::close(fd);
    return ntohs(address.sin_port);
}

inline bool accepts(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return ok;
}

// Server TLS files, made with the openssl command line: a CA, and a server
// certificate it signed for `names` (subjectAltName entries, e.g.
// "IP:127.0.0.1,DNS:localhost").
struct TlsFiles {
    std::string ca_cert, cert, key;
};

inline TlsFiles makeTlsFiles(const TempDir& dir, const std::string& names) {
    const std::string d = dir.path() + "/";
    dir.write("ext.cnf", "subjectAltName=" + names + "\n");
    const std::string quiet = " >/dev/null 2>&1";
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::vector<std::string> steps = {
        "openssl req -x509" + ec + " -keyout " + d + "ca.key -out " + d + "ca.crt -days 2 -subj /CN=dpgate-test-ca",
        "openssl req" + ec + " -keyout " + d + "server.key -out " + d + "server.csr -subj /CN=dpgate-test-redis",
        "openssl x509 -req -in " + d + "server.csr -CA " + d + "ca.crt -CAkey " + d + "ca.key -CAcreateserial -out " +
            d + "server.crt -days 2 -extfile " + d + "ext.cnf",
    };
    for (const std::string& step : steps)
        if (std::system((step + quiet).c_str()) != 0) throw std::runtime_error("failed: " + step);
    return {d + "ca.crt", d + "server.crt", d + "server.key"};
}

struct ServerOptions {
    std::string password;  // --requirepass
    const TlsFiles* tls = nullptr;
};

class RedisServer {
public:
    explicit RedisServer(ServerOptions options = {})
        : options_(std::move(options)), dir_("server" + std::to_string(++count())) {
        port_ = freePort();
        start();
    }
    ~RedisServer() { kill(); }
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    uint16_t port() const { return port_; }
    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

    // Starts it (again) on the same port, and waits until it accepts.
    void start() {
        std::vector<std::string> args = {"redis-server",        "--bind", "127.0.0.1", "--save",    "",
                                         "--appendonly",        "no",     "--dir",     dir_.path(), "--logfile",
                                         dir_.file("redis.log")};
        const std::string port = std::to_string(port_);
        if (options_.tls) {
            args.insert(args.end(),
                        {"--port", "0", "--tls-port", port, "--tls-cert-file", options_.tls->cert, "--tls-key-file",
                         options_.tls->key, "--tls-ca-cert-file", options_.tls->ca_cert, "--tls-auth-clients", "no"});
        } else {
            args.insert(args.end(), {"--port", port});
        }
        if (!options_.password.empty()) args.insert(args.end(), {"--requirepass", options_.password});
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            std::vector<char*> argv;
            for (std::string& arg : args) argv.push_back(arg.data());
            argv.push_back(nullptr);
            ::execvp(argv[0], argv.data());
            ::_exit(127);
        }
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!accepts(port_)) {
            if (std::chrono::steady_clock::now() > until) throw std::runtime_error("redis-server did not start");
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    void kill() {
        if (pid_ <= 0) return;
        if (stopped_) ::kill(pid_, SIGCONT);
        stopped_ = false;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    // Frozen: connections stay open, nothing is answered.
    void pause() {
        ::kill(pid_, SIGSTOP);
        stopped_ = true;
    }
    void resume() {
        ::kill(pid_, SIGCONT);
        stopped_ = false;
    }

private:
    static int& count() {
        static int n = 0;
        return n;
    }

    ServerOptions options_;
    TempDir dir_;
    uint16_t port_ = 0;
    pid_t pid_ = -1;
    bool stopped_ = false;
};

}  // namespace dpgate::gateway::redis::test
