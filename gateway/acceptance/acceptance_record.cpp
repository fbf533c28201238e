#include "gateway/acceptance/acceptance_record.hpp"

#include <nlohmann/json.hpp>

#include <ctime>
#include <map>

namespace dpgate::acceptance {
namespace {

using json = nlohmann::json;

json identityJson(const BackendIdentity& id) {
    return {{"model_id", id.model_id},
            {"max_model_len", id.max_model_len},
            {"version", id.version.empty() ? json(nullptr) : json(id.version)},
            {"server", id.server.empty() ? json(nullptr) : json(id.server)}};
}

// Field readers that say which field is wrong; they throw a std::string,
// caught in parseRecord (never escapes).
const json& field(const json& object, const char* key) {
    auto it = object.find(key);
    if (it == object.end()) throw std::string("missing field '") + key + "'";
    return *it;
}

std::string text(const json& object, const char* key, bool nullable = false) {
    const json& value = field(object, key);
    if (nullable && value.is_null()) return {};
    if (!value.is_string()) throw std::string("'") + key + "' must be a string";
    return value.get<std::string>();
}

uint64_t number(const json& object, const char* key) {
    const json& value = field(object, key);
    if (!value.is_number_unsigned()) throw std::string("'") + key + "' must be a non-negative integer";
    return value.get<uint64_t>();
}

bool flag(const json& object, const char* key) {
    const json& value = field(object, key);
    if (!value.is_boolean()) throw std::string("'") + key + "' must be true or false";
    return value.get<bool>();
}

const json& object(const json& parent, const char* key) {
    const json& value = field(parent, key);
    if (!value.is_object()) throw std::string("'") + key + "' must be an object";
    return value;
}

std::string quoted(const std::string& value) { return value.empty() ? "none" : "'" + value + "'"; }

}  // namespace

std::string recordJson(const AcceptanceRecord& r) {
    json checks = json::array();
    for (const CheckResult& c : r.checks)
        checks.push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
    json out = {{"format", kRecordFormat},
                {"backend", r.backend},
                {"url", r.url},
                {"time", r.time},
                {"passed", r.passed},
                {"configured_window", r.configured_window},
                {"dp_ranks", r.dp_ranks},
                {"identity", identityJson(r.identity)},
                {"dpgate",
                 {{"version", r.dpgate_version},
                  {"config_digest", r.config_digest},
                  {"template_digest", r.template_digest},
                  {"tokenizer_digest", r.tokenizer_digest}}},
                {"checks", std::move(checks)}};
    // Backend texts (messages, headers) may hold broken UTF-8: replaced, never thrown on.
    return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::optional<AcceptanceRecord> parseRecord(std::string_view text_in, std::string& error) {
    json doc = json::parse(text_in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
        error = "not JSON";
        return std::nullopt;
    }
    try {
        if (!doc.is_object()) throw std::string("not a JSON object");
        if (text(doc, "format") != kRecordFormat) throw "format is not " + std::string(kRecordFormat);
        AcceptanceRecord r;
        r.backend = text(doc, "backend");
        r.url = text(doc, "url");
        r.time = text(doc, "time");
        r.passed = flag(doc, "passed");
        r.configured_window = number(doc, "configured_window");
        uint64_t ranks = number(doc, "dp_ranks");
        if (ranks > 4096) throw std::string("'dp_ranks' is out of range");
        r.dp_ranks = uint32_t(ranks);
        const json& id = object(doc, "identity");
        r.identity.model_id = text(id, "model_id");
        r.identity.max_model_len = number(id, "max_model_len");
        r.identity.version = text(id, "version", true);
        r.identity.server = text(id, "server", true);
        const json& d = object(doc, "dpgate");
        r.dpgate_version = text(d, "version");
        r.config_digest = text(d, "config_digest");
        r.template_digest = text(d, "template_digest");
        r.tokenizer_digest = text(d, "tokenizer_digest");
        const json& checks = field(doc, "checks");
        if (!checks.is_array()) throw std::string("'checks' must be a list");
        for (const json& c : checks) {
            if (!c.is_object()) throw std::string("a check must be an object");
            CheckResult check{text(c, "name"), flag(c, "passed"), text(c, "detail")};
            // Records are compared check by check, by name (compareRecords).
            for (const CheckResult& seen : r.checks)
                if (seen.name == check.name) throw "check '" + check.name + "' appears twice";
            r.checks.push_back(std::move(check));
        }
        // A record that says it passed with a failed check is not trusted.
        for (const CheckResult& c : r.checks)
            if (r.passed && !c.passed) throw "'passed' is true but check '" + c.name + "' failed";
        if (r.passed && r.checks.empty()) throw std::string("'passed' is true but there are no checks");
        return r;
    } catch (const std::string& why) {
        error = why;
        return std::nullopt;
    }
}

std::string recordFileName(std::string_view backend, std::string_view time) {
    std::string name = "accept-";
    for (char c : backend) {
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                     c == '_' || c == '-';
        name += plain ? c : '_';
    }
    name += '-';
    for (char c : time)
        if (c != '-' && c != ':') name += c;
    return name + ".json";
}

std::vector<std::string> identityDifferences(const BackendIdentity& recorded, const BackendIdentity& now) {
    std::vector<std::string> out;
    auto differ = [&](const char* what, const std::string& was, const std::string& is) {
        if (was != is) out.push_back(std::string(what) + " " + quoted(is) + " (the record says " + quoted(was) + ")");
    };
    differ("model", recorded.model_id, now.model_id);
    if (recorded.max_model_len != now.max_model_len)
        out.push_back("max_model_len " + std::to_string(now.max_model_len) + " (the record says " +
                      std::to_string(recorded.max_model_len) + ")");
    differ("version", recorded.version, now.version);
    differ("server", recorded.server, now.server);
    return out;
}

std::vector<std::string> compareRecords(const AcceptanceRecord& before, const AcceptanceRecord& after) {
    std::vector<std::string> out;
    auto line = [&](const std::string& what, const std::string& was, const std::string& is) {
        if (was != is) out.push_back(what + ": " + quoted(was) + " -> " + quoted(is));
    };
    line("backend", before.backend, after.backend);
    line("url", before.url, after.url);
    line("identity.model_id", before.identity.model_id, after.identity.model_id);
    if (before.identity.max_model_len != after.identity.max_model_len)
        out.push_back("identity.max_model_len: " + std::to_string(before.identity.max_model_len) + " -> " +
                      std::to_string(after.identity.max_model_len));
    line("identity.version", before.identity.version, after.identity.version);
    line("identity.server", before.identity.server, after.identity.server);
    if (before.configured_window != after.configured_window)
        out.push_back("configured_window: " + std::to_string(before.configured_window) + " -> " +
                      std::to_string(after.configured_window));
    if (before.dp_ranks != after.dp_ranks)
        out.push_back("dp_ranks: " + std::to_string(before.dp_ranks) + " -> " + std::to_string(after.dp_ranks));
    line("dpgate.version", before.dpgate_version, after.dpgate_version);
    line("dpgate.config_digest", before.config_digest, after.config_digest);
    line("dpgate.template_digest", before.template_digest, after.template_digest);
    line("dpgate.tokenizer_digest", before.tokenizer_digest, after.tokenizer_digest);
    if (before.passed != after.passed)
        out.push_back(std::string("passed: ") + (before.passed ? "true" : "false") + " -> " +
                      (after.passed ? "true" : "false"));
    std::map<std::string, bool> was;
    for (const CheckResult& c : before.checks) was[c.name] = c.passed;
    for (const CheckResult& c : after.checks) {
        auto it = was.find(c.name);
        if (it == was.end()) out.push_back("check " + c.name + ": new, " + (c.passed ? "PASS" : "FAIL"));
        else if (it->second != c.passed)
            out.push_back("check " + c.name + ": " + (it->second ? "PASS" : "FAIL") + " -> " +
                          (c.passed ? "PASS" : "FAIL") + (c.passed ? "" : " (" + c.detail + ")"));
        if (it != was.end()) was.erase(it);
    }
    for (const auto& [name, passed] : was)
        out.push_back("check " + name + ": gone (was " + (passed ? "PASS" : "FAIL") + ")");
    return out;
}

std::string utcNow() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buffer;
}

}  // namespace dpgate::acceptance
