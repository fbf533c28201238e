#include "gateway/control/control_plane.hpp"

#include "gateway/acceptance/acceptance_record.hpp"
#include "gateway/acceptance/record_store.hpp"
#include "gateway/backends/backend_registry.hpp"
#include "gateway/backends/role_ledger.hpp"
#include "gateway/control/etcd_client.hpp"
#include "gateway/metrics/gateway_metrics.hpp"
#include "gateway/platform/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <set>
#include <sstream>

namespace dpgate::gateway::control {

namespace {

using json = nlohmann::json;

// How often a replica rewrites its membership key (and so how soon status
// sees what it routes to), and refreshes its lease.
constexpr uint64_t kMemberIntervalMs = 1000;
// The longest pause between attempts while etcd does not answer.
constexpr uint64_t kRetryMaxMs = 1000;

std::string hostName() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
    return name;
}

std::string readPassword(const std::string& file) {
    if (file.empty()) return {};
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("control.etcd.password_file: " + file + ": cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    std::string password = text.str();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) password.pop_back();
    return password;
}

json putOp(const std::string& key, const std::string& value, int64_t lease = 0) {
    json put = {{"key", base64Encode(key)}, {"value", base64Encode(value)}};
    if (lease) put["lease"] = std::to_string(lease);
    return {{"request_put", std::move(put)}};
}

json rangeOp(const std::string& key) { return {{"request_range", {{"key", base64Encode(key)}}}}; }

// The txn's compare: the state key unchanged since `mod_revision` (0: absent).
json unchangedSince(const std::string& key, int64_t mod_revision) {
    if (mod_revision == 0)
        return {{"key", base64Encode(key)}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}};
    return {{"key", base64Encode(key)},
            {"target", "MOD"},
            {"result", "EQUAL"},
            {"mod_revision", std::to_string(mod_revision)}};
}

// The first kv of a range answer (or of a txn's response_range).
std::optional<Kv> firstKv(const json& range) {
    auto kvs = range.find("kvs");
    if (kvs == range.end() || !kvs->is_array() || kvs->empty()) return std::nullopt;
    return readKv(kvs->front());
}

// Request bodies, built outside the coroutines: GCC 12 miscompiles the
// initializer lists of nlohmann's braced JSON inside a coroutine's body.
json idRequest(int64_t id) { return {{"ID", std::to_string(id)}}; }
json ttlRequest(uint64_t ttl_s) { return {{"TTL", std::to_string(ttl_s)}}; }
json keyRequest(const std::string& key) { return {{"key", base64Encode(key)}}; }
json prefixRequest(const std::string& prefix) {
    return {{"key", base64Encode(prefix)}, {"range_end", base64Encode(prefixEnd(prefix))}};
}
json watchRequest(const std::string& prefix, int64_t start_revision) {
    return {{"create_request",
             {{"key", base64Encode(prefix)},
              {"range_end", base64Encode(prefixEnd(prefix))},
              {"start_revision", std::to_string(start_revision)}}}};
}
// Writes `state` at `key` if it is unchanged since `mod_revision`; else reads it.
json stateTxn(const std::string& key, int64_t mod_revision, const acceptance::RoleState& state) {
    return {{"compare", json::array({unchangedSince(key, mod_revision)})},
            {"success", json::array({putOp(key, acceptance::stateJson(state))})},
            {"failure", json::array({rangeOp(key)})}};
}

awaitable<void> pause(uint64_t milliseconds) {
    net::steady_timer timer(co_await net::this_coro::executor, ms(milliseconds));
    co_await timer.async_wait(use_nothrow);
}

}  // namespace

struct ControlPlane::Shared {
    std::map<std::string, acceptance::AcceptanceRecord> records;  // by key, other replicas' included
    std::set<std::string> published;                              // digests this replica wrote
    int64_t lease = 0;
    int64_t watch_from = 0;  // the newest revision read: the watch starts after it
};

std::string describeControl(const conf::Config& config) {
    const std::string cache = config.state.dir.empty() ? std::string(
                                                             "no state.dir, so no local cache: a replica "
                                                             "started while etcd is down takes the config's roles")
                                                       : "state.dir " + config.state.dir +
                                                             " is the cache a replica starts from while etcd is down";
    if (config.control.shared()) {
        const conf::EtcdConfig& etcd = config.control.etcd;
        return "roles: shared through etcd (control.etcd: " + std::to_string(etcd.endpoints.size()) +
               " endpoint(s), prefix " + etcd.prefix + ", replica " +
               (config.control.replica_id.empty() ? std::string("<host name>:<port>") : config.control.replica_id) +
               "): a flip or drain through any replica reaches every replica; " + cache + "\n";
    }
    return std::string("roles: this replica's own (no control.etcd): ") +
           (config.state.dir.empty() ? "not persisted, the config's at every start"
                                     : "kept in state.dir " + config.state.dir) +
           "; other replicas do not see its flips or drains\n";
}

ControlPlane::ControlPlane(const conf::Config& config, ControlPieces pieces, std::string version, uint16_t listen_port)
    : config_(config),
      pieces_(std::move(pieces)),
      shared_(config.control.shared()),
      version_(std::move(version)),
      replica_id_(config.control.replica_id.empty() ? hostName() + ":" + std::to_string(listen_port)
                                                    : config.control.replica_id),
      shared_state_(std::make_unique<Shared>()) {
    if (shared_)
        client_ =
            std::make_unique<EtcdClient>(io_, config.control.etcd, readPassword(config.control.etcd.password_file));
    pieces_.metrics.control_store_up.set(1);
}

ControlPlane::~ControlPlane() { stop(); }

acceptance::RoleState ControlPlane::localRoles() const { return pieces_.roles.current(pieces_.backends); }

void ControlPlane::start() {
    if (!shared_) return;
    {
        std::lock_guard lock(mutex_);
        source_ = pieces_.roles.resumed() ? "cache" : "config";
    }
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> first = done->get_future();
    net::co_spawn(io_, firstSync(done), net::detached);
    thread_ = std::thread([this] { io_.run(); });
    const auto bound = ms(config_.control.etcd.dial_timeout_ms + config_.control.etcd.request_timeout_ms + 500);
    if (first.wait_for(bound) != std::future_status::ready)
        logLine(LogLevel::warn, "control: etcd did not answer within " + std::to_string(bound.count()) +
                                    " ms at start; serving with the roles from " + source_ + " meanwhile");
}

void ControlPlane::stop() {
    if (!thread_.joinable()) return;
    net::post(io_, [this] {
        stopped_ = true;
        if (close_watch_) close_watch_();
    });
    // Give the membership key back so status elsewhere drops this replica now.
    auto revoked = std::make_shared<std::promise<void>>();
    std::future<void> done = revoked->get_future();
    net::co_spawn(io_, revokeLease(revoked), net::detached);
    done.wait_for(ms(config_.control.etcd.request_timeout_ms));
    io_.stop();
    thread_.join();
}

awaitable<void> ControlPlane::revokeLease(std::shared_ptr<std::promise<void>> done) {
    if (shared_state_->lease) {
        const json revoke = idRequest(shared_state_->lease);
        co_await client_->call("/v3/lease/revoke", revoke);
    }
    done->set_value();
}

void ControlPlane::setReachable(bool reachable, const std::string& error) {
    bool was;
    {
        std::lock_guard lock(mutex_);
        was = reachable_;
        reachable_ = reachable;
        if (!reachable) last_error_ = error;
    }
    pieces_.metrics.control_store_up.set(reachable ? 1 : 0);
    if (was && !reachable)
        logLine(LogLevel::error, "control: etcd unreachable (" + error +
                                     "): serving with the roles last applied; flips and drains are refused");
    if (!was && reachable) {
        logLine(LogLevel::info, "control: etcd reachable");
        // A fresh read: whatever the watch missed meanwhile.
        if (close_watch_) close_watch_();
    }
}

awaitable<void> ControlPlane::firstSync(std::shared_ptr<std::promise<void>> done) {
    bool synced = co_await resync();
    if (!synced) {
        std::string source;
        {
            std::lock_guard lock(mutex_);
            source = source_;
        }
        logLine(LogLevel::warn, "control: etcd unreachable at start (" + last_error_ + "): starting from " +
                                    (source == "cache" ? "the local cache " + pieces_.roles.source().file
                                                       : std::string("the config's roles")) +
                                    "; flips and drains are refused until etcd answers");
    }
    done->set_value();
    net::co_spawn(io_, watchLoop(), net::detached);
    net::co_spawn(io_, memberLoop(), net::detached);
}

// The whole prefix read afresh: the state (seeded from this replica's roles
// when etcd has none), the members and the records.
awaitable<bool> ControlPlane::resync() {
    const std::string& prefix = config_.control.etcd.prefix;
    const json range = prefixRequest(prefix);
    EtcdReply reply = co_await client_->call("/v3/kv/range", range);
    if (!reply.ok) {
        setReachable(false, reply.error);
        co_return false;
    }
    setReachable(true, {});
    const int64_t revision = reply.revision();
    bool has_state = false;
    {
        std::lock_guard lock(mutex_);
        members_.clear();
    }
    shared_state_->records.clear();
    if (auto kvs = reply.body.find("kvs"); kvs != reply.body.end() && kvs->is_array())
        for (const json& item : *kvs)
            if (std::optional<Kv> kv = readKv(item)) {
                has_state |= kv->key == key("state");
                applyKv(kv->key, kv->value, kv->mod_revision, false);
            }
    pieces_.records.setShared(shared_state_->records);
    if (pieces_.acceptance_changed) pieces_.acceptance_changed();
    if (!has_state) {
        // The first replica with control.etcd brings its roles (state.dir's, or the config's).
        acceptance::RoleState seed = localRoles();
        const json txn = stateTxn(key("state"), 0, seed);
        EtcdReply seeded = co_await client_->call("/v3/kv/txn", txn);
        if (!seeded.ok) {
            setReachable(!seeded.unreachable, seeded.error);
            co_return false;
        }
        if (seeded.body.value("succeeded", false)) {
            logLine(LogLevel::info, "control: seeded " + key("state") + " with this replica's roles (primary " +
                                        (seed.primary.empty() ? "none" : seed.primary) + ")");
            applyState(seed, seeded.revision());
        } else if (auto responses = seeded.body.find("responses");
                   responses != seeded.body.end() && responses->is_array() && !responses->empty()) {
            if (std::optional<Kv> kv = firstKv((*responses)[0].value("response_range", json::object())))
                applyKv(kv->key, kv->value, kv->mod_revision, false);
        }
        shared_state_->watch_from = seeded.revision();
        co_return true;
    }
    shared_state_->watch_from = revision;
    co_return true;
}

void ControlPlane::applyKv(const std::string& full_key, const std::string& value, int64_t mod_revision, bool deleted) {
    const std::string& prefix = config_.control.etcd.prefix;
    if (!full_key.starts_with(prefix)) return;
    const std::string_view name = std::string_view(full_key).substr(prefix.size());
    if (name == "state") {
        if (deleted) {
            logLine(LogLevel::warn, "control: " + full_key + " was deleted; keeping the roles last applied");
            return;
        }
        std::string error;
        std::optional<acceptance::RoleState> state = acceptance::parseState(value, error);
        if (!state) {
            logLine(LogLevel::error, "control: " + full_key + " is not a state (" + error + "); not applied");
            return;
        }
        if (std::string foreign = acceptance::foreignReason(*state, config_); !foreign.empty()) {
            logLine(LogLevel::error, "control: " + full_key + " is not this deployment's state: " + foreign +
                                         "; not applied (another prefix per deployment)");
            return;
        }
        applyState(*state, mod_revision);
        return;
    }
    if (name.starts_with("replicas/")) {
        const std::string id(name.substr(9));
        std::lock_guard lock(mutex_);
        if (deleted) {
            members_.erase(id);
            return;
        }
        json member = json::parse(value, nullptr, false);
        if (member.is_object()) members_[id] = std::move(member);
        return;
    }
    if (name.starts_with("acceptance/")) {
        if (deleted) {
            shared_state_->records.erase(full_key);
            return;
        }
        std::string error;
        if (std::optional<acceptance::AcceptanceRecord> record = acceptance::parseRecord(value, error))
            shared_state_->records[full_key] = std::move(*record);
    }
}

void ControlPlane::applyState(const acceptance::RoleState& state, int64_t revision) {
    {
        std::lock_guard lock(mutex_);
        latest_revision_ = std::max(latest_revision_, revision);
        if (revision <= applied_revision_) return;
    }
    const std::string before = pieces_.backends.primaryName();
    pieces_.backends.applyRoles(state.primary, state.drained);
    pieces_.roles.adopt(state, "etcd", pieces_.backends);
    {
        std::lock_guard lock(mutex_);
        applied_revision_ = revision;
        applied_at_ = acceptance::utcNow();
        source_ = "etcd";
    }
    pieces_.metrics.control_revision.set(revision);
    if (before != state.primary) {
        std::string why;
        if (!state.flips.empty() && state.flips.front().to == state.primary)
            why = " (flip by " + state.flips.front().who + " at " + state.flips.front().at + ")";
        logLine(LogLevel::info, "control: " + (state.primary.empty() ? std::string("no backend") : state.primary) +
                                    " is the primary, from etcd revision " + std::to_string(revision) + why);
    }
}

awaitable<void> ControlPlane::watchLoop() {
    const std::string& prefix = config_.control.etcd.prefix;
    uint64_t backoff = 100;
    bool fresh = true;  // firstSync just read everything
    while (!stopped_) {
        if (!fresh) {
            pieces_.metrics.control_resyncs.inc();
            if (!co_await resync()) {
                co_await pause(backoff);
                backoff = std::min(backoff * 2, kRetryMaxMs);
                continue;
            }
        }
        fresh = false;
        const int64_t from = shared_state_->watch_from;
        const json request = watchRequest(prefix, from + 1);
        EtcdReply failure;
        std::unique_ptr<EtcdClient::Stream> stream = co_await client_->open("/v3/watch", request, 0, failure);
        if (!stream) {
            setReachable(false, failure.error);
            co_await pause(backoff);
            backoff = std::min(backoff * 2, kRetryMaxMs);
            continue;
        }
        backoff = 100;
        EtcdClient::Stream* open = stream.get();
        close_watch_ = [open] { open->close(); };
        if (stopped_) open->close();
        while (std::optional<json> object = co_await stream->next()) {
            auto result = object->find("result");
            if (result == object->end() || !result->is_object()) break;  // an error: read afresh
            if (result->value("canceled", false) || readInt64(*result, "compact_revision") != 0) {
                logLine(LogLevel::warn, "control: the etcd watch was cancelled (compacted at revision " +
                                            std::to_string(readInt64(*result, "compact_revision")) +
                                            "); reading the state afresh");
                break;
            }
            bool records_changed = false;
            if (auto events = result->find("events"); events != result->end() && events->is_array())
                for (const json& event : *events) {
                    std::optional<Kv> kv = readKv(event.value("kv", json::object()));
                    if (!kv) continue;
                    const bool deleted = event.value("type", "") == "DELETE";
                    records_changed |= kv->key.starts_with(prefix + "acceptance/");
                    applyKv(kv->key, kv->value, kv->mod_revision, deleted);
                    shared_state_->watch_from = std::max(shared_state_->watch_from, kv->mod_revision);
                }
            if (records_changed) {
                pieces_.records.setShared(shared_state_->records);
                if (pieces_.acceptance_changed) pieces_.acceptance_changed();
            }
        }
        close_watch_ = nullptr;
    }
}

awaitable<bool> ControlPlane::publishMember() {
    Shared& s = *shared_state_;
    if (s.lease == 0) {
        const json grant = ttlRequest(config_.control.etcd.lease_ttl_s);
        EtcdReply granted = co_await client_->call("/v3/lease/grant", grant);
        if (!granted.ok) {
            setReachable(!granted.unreachable, granted.error);
            co_return false;
        }
        s.lease = readInt64(granted.body, "ID");
    } else {
        // The gateway's keepalive is a stream; its first answer is the renewal.
        EtcdReply failure;
        const json keepalive = idRequest(s.lease);
        std::unique_ptr<EtcdClient::Stream> stream =
            co_await client_->open("/v3/lease/keepalive", keepalive, config_.control.etcd.request_timeout_ms, failure);
        if (!stream) {
            setReachable(false, failure.error);
            co_return false;
        }
        std::optional<json> renewed = co_await stream->next();
        stream->close();
        if (!renewed) {
            setReachable(false, "lease keepalive: " + stream->error());
            co_return false;
        }
        if (readInt64(renewed->value("result", json::object()), "TTL") <= 0) {
            s.lease = 0;  // expired while etcd was away: a new one next time
            co_return false;
        }
    }
    const json member = memberJson();
    const json put_member = putOp(key("replicas/" + replica_id_), member.dump(), s.lease)["request_put"];
    EtcdReply put = co_await client_->call("/v3/kv/put", put_member);
    if (!put.ok) {
        setReachable(!put.unreachable, put.error);
        if (!put.unreachable) s.lease = 0;  // "requested lease not found"
        co_return false;
    }
    setReachable(true, {});
    co_return true;
}

json ControlPlane::memberJson() const {
    json health = json::object();
    json up = json::array();
    std::string primary;
    for (const BackendView& b : pieces_.backends.snapshot()) {
        health[b.name] = !b.probed ? "unknown" : b.healthy ? "up" : "down";
        if (b.probed && b.healthy) up.push_back(b.name);
        if (b.role == conf::BackendRole::primary) primary = b.name;
    }
    std::lock_guard lock(mutex_);
    return {{"id", replica_id_},
            {"version", version_},
            {"config_digest", config_.shared_digest},
            {"primary", primary},
            {"revision", applied_revision_},
            {"backends_up", std::move(up)},
            {"health", std::move(health)},
            {"last_seen", acceptance::utcNow()},
            {"source", source_}};
}

awaitable<void> ControlPlane::publishRecords() {
    for (const auto& [digest, record] : pieces_.records.localPassing()) {
        if (shared_state_->published.contains(digest)) continue;
        std::string name = record.backend;
        std::replace(name.begin(), name.end(), '/', '_');
        const json put_record =
            putOp(key("acceptance/" + name + "/" + digest), acceptance::recordJson(record))["request_put"];
        EtcdReply put = co_await client_->call("/v3/kv/put", put_record);
        if (!put.ok) co_return;
        shared_state_->published.insert(digest);
    }
}

awaitable<void> ControlPlane::memberLoop() {
    while (!stopped_) {
        const bool published = co_await publishMember();
        if (published) co_await publishRecords();
        co_await pause(kMemberIntervalMs);
    }
}

awaitable<ControlOutcome> ControlPlane::commit(std::function<std::string(acceptance::RoleState&)> change, bool retry) {
    const std::string state_key = key("state");
    for (int attempt = 0; attempt < (retry ? 5 : 1) + 1; ++attempt) {
        const json range = keyRequest(state_key);
        EtcdReply read = co_await client_->call("/v3/kv/range", range);
        if (!read.ok) {
            setReachable(!read.unreachable, read.error);
            co_return ControlOutcome{ControlOutcome::Kind::unavailable, "etcd cannot be reached: " + read.error};
        }
        std::optional<Kv> kv = firstKv(read.body);
        acceptance::RoleState state;
        if (kv) {
            std::string error;
            std::optional<acceptance::RoleState> parsed = acceptance::parseState(kv->value, error);
            if (!parsed)
                co_return ControlOutcome{ControlOutcome::Kind::refused,
                                         state_key + " in etcd is not a state (" + error + ")"};
            state = std::move(*parsed);
            applyState(state, kv->mod_revision);  // what this replica may not have seen yet
        } else {
            state = localRoles();
        }
        if (std::string conflict = change(state); !conflict.empty())
            co_return ControlOutcome{ControlOutcome::Kind::conflict, conflict};
        state.written_at = acceptance::utcNow();
        const int64_t read_revision = kv ? kv->mod_revision : 0;
        const json txn = stateTxn(state_key, read_revision, state);
        EtcdReply written = co_await client_->call("/v3/kv/txn", txn);
        if (!written.ok) {
            setReachable(!written.unreachable, written.error);
            co_return ControlOutcome{
                ControlOutcome::Kind::unavailable,
                "etcd did not confirm the change (" + written.error + "); /admin/status shows whether it took"};
        }
        setReachable(true, {});
        if (written.body.value("succeeded", false)) {
            applyState(state, written.revision());
            co_return ControlOutcome{};
        }
        // Another replica wrote first: its state, then (drains) try again on it.
        if (auto responses = written.body.find("responses");
            responses != written.body.end() && responses->is_array() && !responses->empty())
            if (std::optional<Kv> now = firstKv((*responses)[0].value("response_range", json::object())))
                applyKv(now->key, now->value, now->mod_revision, false);
        if (!retry) break;
    }
    co_return ControlOutcome{ControlOutcome::Kind::conflict, ""};
}

awaitable<ControlOutcome> ControlPlane::flip(std::string from, acceptance::FlipEvent event) {
    auto task = [this, from = std::move(from), event = std::move(event)]() -> awaitable<ControlOutcome> {
        // Named, not a temporary of the co_await: GCC 12 may destroy such a
        // temporary twice.
        std::function<std::string(acceptance::RoleState&)> change = [&](acceptance::RoleState& state) -> std::string {
            if (state.primary != from)
                return "the primary is " + (state.primary.empty() ? std::string("none") : state.primary) +
                       acceptance::flippedBy(state.flips, state.primary) + ", not " +
                       (from.empty() ? std::string("none") : from);
            acceptance::FlipEvent flip = event;
            flip.from = from;
            state.primary = flip.to;
            state.flips.insert(state.flips.begin(), std::move(flip));
            if (state.flips.size() > acceptance::kKeptFlips) state.flips.pop_back();
            return {};
        };
        ControlOutcome outcome = co_await commit(std::move(change), false);
        if (outcome.kind == ControlOutcome::Kind::conflict && outcome.message.empty()) {
            // The txn lost to another flip: name it from what was applied just now.
            const std::string primary = pieces_.backends.primaryName();
            outcome.message = "another flip committed first: the primary is " + (primary.empty() ? "none" : primary) +
                              acceptance::flippedBy(pieces_.roles.flips(), primary);
        }
        co_return outcome;
    };
    co_return co_await net::co_spawn(io_, task(), net::use_awaitable_t<Executor>{});
}

awaitable<ControlOutcome> ControlPlane::drain(std::string name, bool drained) {
    auto task = [this, name = std::move(name), drained]() -> awaitable<ControlOutcome> {
        std::function<std::string(acceptance::RoleState&)> change = [&](acceptance::RoleState& state) -> std::string {
            auto at = std::find(state.drained.begin(), state.drained.end(), name);
            if (drained && at == state.drained.end()) state.drained.push_back(name);
            if (!drained && at != state.drained.end()) state.drained.erase(at);
            return {};
        };
        ControlOutcome outcome = co_await commit(std::move(change), true);
        if (outcome.kind == ControlOutcome::Kind::conflict && outcome.message.empty())
            outcome.message = "the shared state kept changing under the drain; try again";
        co_return outcome;
    };
    co_return co_await net::co_spawn(io_, task(), net::use_awaitable_t<Executor>{});
}

json ControlPlane::controlJson() const {
    std::lock_guard lock(mutex_);
    if (!shared_)
        return {{"store", "local"},
                {"reachable", true},
                {"revision", 0},
                {"applied_at", nullptr},
                {"source", pieces_.roles.source().source},
                {"replica_id", replica_id_}};
    return {{"store", "etcd"},
            {"reachable", reachable_},
            {"revision", applied_revision_},
            {"latest_revision", latest_revision_},
            {"applied_at", applied_at_.empty() ? json(nullptr) : json(applied_at_)},
            {"source", source_},
            {"replica_id", replica_id_},
            {"endpoints", config_.control.etcd.endpoints},
            {"prefix", config_.control.etcd.prefix},
            {"last_error", last_error_.empty() ? json(nullptr) : json(last_error_)}};
}

json ControlPlane::replicasJson() const {
    json out = json::array();
    if (!shared_) return out;
    std::lock_guard lock(mutex_);
    for (const auto& [id, member] : members_) {
        json entry = member;
        entry["self"] = id == replica_id_;
        entry["lagging"] = readInt64(member, "revision") < latest_revision_;
        entry["other_config"] = member.value("config_digest", "") != config_.shared_digest;
        out.push_back(std::move(entry));
    }
    return out;
}

}  // namespace dpgate::gateway::control
