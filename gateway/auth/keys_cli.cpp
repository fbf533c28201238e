#include "gateway/auth/keys_cli.hpp"

#include "conf/config.hpp"
#include "conf/keys_file.hpp"
#include "conf/sha256_hex.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dpgate::auth {

namespace {

constexpr const char* usage =
    "usage: dpgate keys add NAME --file F [--trusted] [--metrics] [--max-concurrent N] [--requests-per-min N]\n"
    "       dpgate keys list --file F\n"
    "       dpgate keys remove NAME --file F\n";

// A refusal with its message; the exit code tells usage errors apart.
struct CliError : std::runtime_error {
    CliError(int code, const std::string& message) : std::runtime_error(message), exit_code(code) {}
    int exit_code;
};

struct Args {
    std::string command;
    std::vector<std::string> positional;
    std::string file;
    bool trusted = false;
    bool metrics = false;
    uint32_t max_concurrent = 0;
    uint32_t requests_per_min = 0;
};

uint32_t parseCount(const std::string& option, const std::string& text) {
    uint32_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        throw CliError(2,
                       option + " expects a whole number 0.." + std::to_string(UINT32_MAX) + ", got \"" + text + "\"");
    return value;
}

Args parseArgs(int argc, char** argv) {
    if (argc < 1) throw CliError(2, "missing command");
    Args args;
    args.command = argv[0];
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        std::optional<std::string> inline_value;
        if (arg.rfind("--", 0) == 0) {
            if (const auto eq = arg.find('='); eq != std::string::npos) {
                inline_value = arg.substr(eq + 1);
                arg.resize(eq);
            }
        }
        const auto value = [&]() -> std::string {
            if (inline_value) return *inline_value;
            if (i + 1 >= argc) throw CliError(2, arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--file") {
            args.file = value();
        } else if (arg == "--trusted" && !inline_value) {
            args.trusted = true;
        } else if (arg == "--metrics" && !inline_value) {
            args.metrics = true;
        } else if (arg == "--max-concurrent") {
            args.max_concurrent = parseCount(arg, value());
        } else if (arg == "--requests-per-min") {
            args.requests_per_min = parseCount(arg, value());
        } else if (arg.size() > 1 && arg[0] == '-') {
            throw CliError(2, "unknown option " + std::string(argv[i]));
        } else {
            args.positional.push_back(arg);
        }
    }
    return args;
}

// The keys-file loader's rule (conf/auth_key_reader.cpp, checkKeyName):
// the name labels metrics and logs.
bool isValidKeyName(std::string_view name) {
    return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '@' || c == '-';
    });
}

// '@' cannot start a plain YAML scalar and a leading '-' or '.' reads
// badly; quote those. The name charset holds nothing that needs escaping.
std::string yamlKey(const std::string& name) {
    const char first = name.front();
    const bool plain = (first >= 'a' && first <= 'z') || (first >= 'A' && first <= 'Z') ||
                       (first >= '0' && first <= '9') || first == '_';
    return plain ? name : "\"" + name + "\"";
}

std::string errnoText() { return std::strerror(errno); }

// An open keys file, locked against a concurrent `dpgate keys` on the same file.
class LockedFile {
public:
    LockedFile(const std::string& path, int flags) : path_(path) {
        fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
        if (fd_ < 0) throw CliError(1, "cannot open " + path + ": " + errnoText());
        if (::flock(fd_, LOCK_EX) != 0) {
            const std::string why = errnoText();
            ::close(fd_);
            throw CliError(1, "cannot lock " + path + ": " + why);
        }
    }
    ~LockedFile() { ::close(fd_); }  // closing drops the lock
    LockedFile(const LockedFile&) = delete;
    LockedFile& operator=(const LockedFile&) = delete;

    int fd() const { return fd_; }

    std::string readAll() const {
        std::string text;
        char buffer[8192];
        off_t offset = 0;
        for (;;) {
            const ssize_t n = ::pread(fd_, buffer, sizeof buffer, offset);
            if (n < 0) {
                if (errno == EINTR) continue;
                throw CliError(1, "cannot read " + path_ + ": " + errnoText());
            }
            if (n == 0) return text;
            text.append(buffer, static_cast<std::size_t>(n));
            offset += n;
        }
    }

private:
    std::string path_;
    int fd_ = -1;
};

void writeAll(int fd, std::string_view data, const std::string& path) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            throw CliError(1, "cannot write " + path + ": " + errnoText());
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    if (::fsync(fd) != 0) throw CliError(1, "cannot write " + path + ": " + errnoText());
}

std::vector<conf::AuthKey> parseOrRefuse(const std::string& text, const std::string& path) {
    try {
        return conf::parseKeysText(text, path);
    } catch (const conf::ConfigError& e) {
        throw CliError(1, std::string(e.what()) + " (fix the file first; nothing was changed)");
    }
}

std::string requireName(const Args& args) {
    if (args.positional.size() != 1) throw CliError(2, args.command + " takes exactly one NAME");
    const std::string& name = args.positional.front();
    if (!isValidKeyName(name))
        throw CliError(2, "key name \"" + name + "\" must be 1-64 characters of [A-Za-z0-9._@-]");
    return name;
}

void requireFileOption(const Args& args) {
    if (args.file.empty()) throw CliError(2, args.command + " needs --file F");
}

int addKey(const Args& args, std::ostream& out, std::ostream& err) {
    const std::string name = requireName(args);
    requireFileOption(args);
    LockedFile file(args.file, O_RDWR | O_CREAT | O_APPEND);
    const std::string text = file.readAll();
    const std::vector<conf::AuthKey> keys = parseOrRefuse(text, args.file);
    if (std::any_of(keys.begin(), keys.end(), [&](const conf::AuthKey& k) { return k.name == name; }))
        throw CliError(1, "key \"" + name + "\" already exists in " + args.file + " (dpgate keys remove " + name +
                              " --file " + args.file + " first)");

    const std::string key = generateApiKey();
    conf::AuthKey added{.name = name,
                        .sha256 = conf::sha256Hex(key),
                        .trusted = args.trusted,
                        .max_concurrent = args.max_concurrent,
                        .requests_per_min = args.requests_per_min,
                        .metrics = args.metrics};
    std::string line = yamlKey(name) + ": {sha256: " + added.sha256;
    if (added.trusted) line += ", trusted: true";
    if (added.max_concurrent) line += ", max_concurrent: " + std::to_string(added.max_concurrent);
    if (added.requests_per_min) line += ", requests_per_min: " + std::to_string(added.requests_per_min);
    if (added.metrics) line += ", metrics: true";
    line += "}\n";
    const std::string addition = (text.empty() || text.back() == '\n' ? "" : "\n") + line;

    // What the gateway will load must be exactly what was there plus the new key.
    std::vector<conf::AuthKey> expected = keys;
    expected.push_back(added);
    if (parseOrRefuse(text + addition, args.file) != expected)
        throw CliError(1,
                       "internal error: the new entry for \"" + name + "\" would not read back; nothing was changed");

    writeAll(file.fd(), addition, args.file);
    out << key << "\n" << std::flush;
    err << "added key \"" << name << "\" to " << args.file
        << "; the key above is shown only this once (the file keeps its SHA-256)\n";
    return 0;
}

int listKeys(const Args& args, std::ostream& out) {
    if (!args.positional.empty()) throw CliError(2, "list takes no NAME");
    requireFileOption(args);
    std::vector<conf::AuthKey> keys;
    try {
        keys = conf::loadKeysFile(args.file);
    } catch (const conf::ConfigError& e) {
        throw CliError(1, e.what());
    }
    for (const conf::AuthKey& key : keys) {
        out << key.name;
        if (key.trusted) out << " trusted";
        if (key.max_concurrent) out << " max_concurrent=" << key.max_concurrent;
        if (key.requests_per_min) out << " requests_per_min=" << key.requests_per_min;
        if (key.metrics) out << " metrics";
        out << "\n";
    }
    return 0;
}

// Is `line` the top-level entry of `name` ("name:", "\"name\":", "'name':")?
bool startsEntry(std::string_view line, const std::string& name) {
    for (const std::string& spelled : {name, "\"" + name + "\"", "'" + name + "'"}) {
        if (line.rfind(spelled, 0) != 0) continue;
        std::string_view rest = line.substr(spelled.size());
        while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
        if (!rest.empty() && rest.front() == ':') return true;
    }
    return false;
}

// The text without the entry's line and the indented lines under it
// (block form); comments and every other entry stay as they were.
std::string withoutEntry(const std::string& text, const std::string& name) {
    std::string result;
    bool removing = false;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        end = end == std::string::npos ? text.size() : end + 1;
        const std::string_view line(text.data() + pos, end - pos);
        const bool indented = !line.empty() && (line.front() == ' ' || line.front() == '\t');
        if (startsEntry(line, name)) removing = true;
        else if (!indented) removing = false;
        if (!removing) result.append(line);
        pos = end;
    }
    return result;
}

int removeKey(const Args& args, std::ostream& err) {
    const std::string name = requireName(args);
    requireFileOption(args);
    LockedFile file(args.file, O_RDONLY);
    const std::string text = file.readAll();
    const std::vector<conf::AuthKey> keys = parseOrRefuse(text, args.file);
    std::vector<conf::AuthKey> expected;
    for (const conf::AuthKey& key : keys)
        if (key.name != name) expected.push_back(key);
    if (expected.size() == keys.size()) throw CliError(1, "no key \"" + name + "\" in " + args.file);

    const std::string updated = withoutEntry(text, name);
    bool same = false;
    try {
        same = conf::parseKeysText(updated, args.file) == expected;
    } catch (const conf::ConfigError&) {
    }
    if (!same)
        throw CliError(1, "cannot remove \"" + name + "\" from " + args.file +
                              " without disturbing other entries; edit the file by hand (nothing was changed)");

    // Replace the file atomically, keeping its permissions.
    struct stat info {};
    if (::fstat(file.fd(), &info) != 0) throw CliError(1, "cannot stat " + args.file + ": " + errnoText());
    const std::string temp_path = args.file + ".tmp." + std::to_string(::getpid());
    const int temp = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (temp < 0) throw CliError(1, "cannot create " + temp_path + ": " + errnoText());
    try {
        if (::fchmod(temp, info.st_mode & 07777) != 0)
            throw CliError(1, "cannot chmod " + temp_path + ": " + errnoText());
        writeAll(temp, updated, temp_path);
        if (::close(temp) != 0) throw CliError(1, "cannot write " + temp_path + ": " + errnoText());
    } catch (...) {
        ::close(temp);
        ::unlink(temp_path.c_str());
        throw;
    }
    if (::rename(temp_path.c_str(), args.file.c_str()) != 0) {
        const std::string why = errnoText();
        ::unlink(temp_path.c_str());
        throw CliError(1, "cannot replace " + args.file + ": " + why);
    }
    err << "removed key \"" << name << "\" from " << args.file << "\n";
    return 0;
}

}  // namespace

std::string generateApiKey() {
    static constexpr char alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    // 43 base62 digits carry 256.03 bits. Bytes >= 248 are rejected so
    // that byte % 62 is uniform.
    constexpr std::size_t digits = 43;
    std::string key = "sk-dpgate-";
    unsigned char random[64];
    while (key.size() < 10 + digits) {
        if (RAND_bytes(random, sizeof random) != 1) throw std::runtime_error("OpenSSL RAND_bytes failed");
        for (unsigned char byte : random) {
            if (byte >= 248 || key.size() == 10 + digits) continue;
            key += alphabet[byte % 62];
        }
    }
    OPENSSL_cleanse(random, sizeof random);
    return key;
}

int runKeysCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
    try {
        const Args args = parseArgs(argc, argv);
        if (args.command == "add") return addKey(args, out, err);
        if (args.command == "list") return listKeys(args, out);
        if (args.command == "remove") return removeKey(args, err);
        if (args.command == "help" || args.command == "--help" || args.command == "-h") {
            out << usage;
            return 0;
        }
        throw CliError(2, "unknown command \"" + args.command + "\"");
    } catch (const CliError& e) {
        err << "dpgate keys: " << e.what() << "\n";
        if (e.exit_code == 2) err << usage;
        return e.exit_code;
    } catch (const std::exception& e) {
        err << "dpgate keys: " << e.what() << "\n";
        return 1;
    }
}

int runKeysCli(int argc, char** argv) { return runKeysCli(argc, argv, std::cout, std::cerr); }

}  // namespace dpgate::auth
