#include "gateway/acceptance/role_state.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace dpgate::acceptance {
namespace {

using json = nlohmann::json;

json flipJson(const FlipEvent& f) {
    json out = {{"who", f.who}, {"at", f.at}, {"from", f.from}, {"to", f.to}, {"forced", f.forced}};
    if (!f.record.empty()) out["record"] = f.record;
    return out;
}

std::string stringField(const json& object, const char* key) {
    auto it = object.find(key);
    if (it == object.end() || !it->is_string()) throw std::string("'") + key + "' must be a string";
    return it->get<std::string>();
}

std::vector<std::string> names(const json& object, const char* key) {
    auto it = object.find(key);
    if (it == object.end() || !it->is_array()) throw std::string("'") + key + "' must be a list of names";
    std::vector<std::string> out;
    for (const json& n : *it) {
        if (!n.is_string()) throw std::string("'") + key + "' must be a list of names";
        out.push_back(n.get<std::string>());
    }
    return out;
}

bool contains(const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

std::string flippedBy(const std::vector<FlipEvent>& flips, std::string_view primary) {
    if (flips.empty() || flips.front().to != primary) return {};
    return " (flipped by " + flips.front().who + " at " + flips.front().at + ")";
}

std::string stateJson(const RoleState& s) {
    json flips = json::array();
    for (const FlipEvent& f : s.flips) flips.push_back(flipJson(f));
    json out = {{"format", kStateFormat},    {"model", s.model_id},  {"backends", s.backends},
                {"primary", s.primary},      {"drained", s.drained}, {"flips", std::move(flips)},
                {"written_at", s.written_at}};
    return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::optional<RoleState> parseState(std::string_view text, std::string& error) {
    json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
        error = text.empty() ? "the file is empty" : "not JSON (truncated or damaged)";
        return std::nullopt;
    }
    try {
        if (!doc.is_object()) throw std::string("not a JSON object");
        if (stringField(doc, "format") != kStateFormat) throw "format is not " + std::string(kStateFormat);
        RoleState s;
        s.model_id = stringField(doc, "model");
        s.backends = names(doc, "backends");
        s.primary = stringField(doc, "primary");
        s.drained = names(doc, "drained");
        s.written_at = stringField(doc, "written_at");
        auto flips = doc.find("flips");
        if (flips == doc.end() || !flips->is_array()) throw std::string("'flips' must be a list");
        for (const json& f : *flips) {
            if (!f.is_object()) throw std::string("a flip must be an object");
            auto forced = f.find("forced");
            if (forced == f.end() || !forced->is_boolean())
                throw std::string("a flip's 'forced' must be true or false");
            s.flips.push_back({stringField(f, "who"), stringField(f, "at"), stringField(f, "from"),
                               stringField(f, "to"), forced->get<bool>(),
                               f.contains("record") ? stringField(f, "record") : ""});
            if (s.flips.size() > kKeptFlips) s.flips.pop_back();
        }
        if (!s.primary.empty() && !contains(s.backends, s.primary))
            throw "the primary '" + s.primary + "' is not among its backends";
        return s;
    } catch (const std::string& why) {
        error = why;
        return std::nullopt;
    }
}

std::string foreignReason(const RoleState& s, const conf::Config& config) {
    if (s.model_id != config.model.id)
        return "it is for model '" + s.model_id + "', the config serves '" + config.model.id + "'";
    std::vector<std::string> configured;
    for (const conf::BackendConfig& b : config.backends) configured.push_back(b.name);
    std::vector<std::string> a = s.backends, b = configured;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) {
        std::string list;
        for (const std::string& n : s.backends) list += (list.empty() ? "" : ", ") + n;
        return "it names the backends [" + list + "], not the config's";
    }
    for (const std::string& n : s.drained)
        if (!contains(configured, n)) return "it drains '" + n + "', which the config does not name";
    if (config.routing.mode == conf::RoutingMode::failover && s.primary.empty())
        return "it has no primary, and routing.mode is failover";
    return {};
}

std::string stateFilePath(const std::string& dir) { return (std::filesystem::path(dir) / "state.json").string(); }

std::string writeFileAtomically(const std::string& path, std::string_view text) {
    const std::filesystem::path target(path);
    const std::filesystem::path folder = target.parent_path().empty() ? "." : target.parent_path();
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) return "cannot create " + folder.string() + ": " + ec.message();
    const std::string temp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0) return "cannot write " + temp + ": " + std::strerror(errno);
    size_t written = 0;
    while (written < text.size()) {
        ssize_t n = ::write(fd, text.data() + written, text.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            std::string why = "write " + temp + ": " + std::strerror(errno);
            ::close(fd);
            ::unlink(temp.c_str());
            return why;
        }
        written += size_t(n);
    }
    const int synced = ::fsync(fd);
    const int sync_errno = errno;
    if (::close(fd) != 0 || synced != 0) {
        std::string why = "fsync " + temp + ": " + std::strerror(synced != 0 ? sync_errno : errno);
        ::unlink(temp.c_str());
        return why;
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        std::string why = "rename to " + path + ": " + std::strerror(errno);
        ::unlink(temp.c_str());
        return why;
    }
    int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
        ::fsync(dir_fd);
        ::close(dir_fd);
    }
    return {};
}

}  // namespace dpgate::acceptance
