#include "gateway/process/server.hpp"

#include "admission/request_scan.hpp"

#include "gateway/acceptance/writable_dir.hpp"
#include "gateway/backends/health_checker.hpp"
#include "gateway/net/tls_context.hpp"
#include "gateway/ops/admin_listener.hpp"
#include "gateway/path/admission_pool.hpp"
#include "gateway/path/make_admitter.hpp"
#include "gateway/platform/cycle_clock.hpp"
#include "gateway/platform/log.hpp"
#include "gateway/process/worker.hpp"

#include <boost/asio/signal_set.hpp>

#include <algorithm>
#include <csignal>
#include <iostream>
#include <iterator>
#include <thread>

namespace dpgate::gateway {

namespace {
conf::Config withThreads(conf::Config config) {
    if (config.threads == 0) config.threads = std::max(1u, std::thread::hardware_concurrency());
    return config;
}

// Counting is what admission rests on: a configured tokenizer or chat
// template that does not load stops the process instead of letting requests
// through uncounted.
ModelFiles loadAndReport(const conf::ModelConfig& model) {
    ModelFiles files = loadModelFiles(model);
    std::string_view summary = files.summary;
    while (!summary.empty()) {
        const size_t end = summary.find('\n');
        logLine(files.chat_template ? LogLevel::info : LogLevel::warn, std::string(summary.substr(0, end)));
        summary = end == std::string_view::npos ? std::string_view() : summary.substr(end + 1);
    }
    // simdjson picks its stage-1 kernel by CPU at start (request_scan.hpp).
    logLine(LogLevel::info, "request scan: simdjson " + admission::RequestScanner::simdjsonKernels());
    return files;
}
}  // namespace

namespace {
// The upstream pools speak plain HTTP: an https:// backend would be sent
// cleartext to its TLS port, so it is refused instead.
conf::Config withPlainUpstreams(conf::Config config) {
    for (const conf::BackendConfig& backend : config.backends)
        if (backend.scheme != "http")
            throw std::runtime_error("backend " + backend.name + ": " + backend.url +
                                     ": upstream https is not supported yet; use http:// on the backend network");
    return config;
}
}  // namespace

Server::Server(conf::Config config, ServeOptions options)
    : config_(withThreads(withPlainUpstreams(std::move(config)))),
      current_(&config_),
      model_files_(loadAndReport(config_.model)),
      shared_segments_(std::make_shared<admission::SharedSegmentCache>(config_.model.count_cache_bytes / 2)),
      keys_(std::make_shared<const auth::KeyStore>(config_.auth, config_.admin)),
      access_log_(AccessLogSink::open(config_.log.access)),
      tls_(config_.listen.tls.enabled() ? makeServerTlsContext(config_.listen.tls) : nullptr),
      key_limiter_(std::make_shared<auth::KeyLimiter>(config_.auth)),
      budgets_(config_, [this] { return live_replicas_.load(std::memory_order_relaxed); }),
      backends_(config_),
      router_(backends_, config_),
      count_check_(metrics_, config_.backends),
      version_(options.version),
      roles_(config_, options.ignore_state),
      records_(config_.acceptance.dir) {
    if (const std::optional<acceptance::RoleState>& state = roles_.resumed()) {
        backends_.applyRoles(state->primary, state->drained);
        std::string drained;
        for (const std::string& name : state->drained) drained += " " + name;
        logLine(LogLevel::info, "state: roles resumed from " + roles_.source().file + " (written " + state->written_at +
                                    "): primary " + (state->primary.empty() ? "none" : state->primary) +
                                    (drained.empty() ? "" : ", drained:" + drained));
    }
    refreshAcceptance();
    // The request clock measures its scale here (10 ms), not in the first request.
    logLine(LogLevel::debug, CycleClock::scale().mult != 0 ? "request timings: the time-stamp counter"
                                                           : "request timings: steady_clock");
    idle_upstream_ = std::make_unique<metrics::ShardedCount<int64_t>[]>(config_.backends.size());
    // Half the threads per key at most: one client's stream of huge requests
    // leaves the other half to everyone else.
    const size_t admission_threads = admissionThreads();
    admission_pool_ = std::make_unique<AdmissionPool>(
        admission_threads, std::max<size_t>(1, admission_threads / 2), [this, admission_threads](size_t) {
            return makeAdmitter(config_, model_files_, shared_segments_, admission_threads, AdmitterRole::pool);
        });
    logLine(LogLevel::info, "admission: " + std::to_string(admission_threads) + " threads for bodies of " +
                                std::to_string(config_.limits.offload_admission_bytes) + " bytes and more, " +
                                std::to_string(admission_pool_->perKeyThreads()) + " at most per key");
    path_shared_.reset(new PathShared{.keys = keys_,
                                      .key_limiter = key_limiter_,
                                      .budgets = budgets_,
                                      .backends = backends_,
                                      .router = router_,
                                      .count_check = count_check_,
                                      .admission_pool = *admission_pool_,
                                      .metrics = metrics_,
                                      .readings = *this});
    for (size_t i = 0; i < config_.threads; ++i) workers_.push_back(std::make_unique<Worker>(*this, *path_shared_, i));
}

Server::~Server() {
    admission_pool_.reset();
    // I/O objects that live on a worker's io_context go before the workers.
    drain_timer_.reset();
    acceptance_timer_.reset();
    admin_.reset();
    health_.reset();
    control_.reset();
    workers_.clear();
}

int Server::run() {
    std::signal(SIGPIPE, SIG_IGN);
    Worker& main_worker = *workers_.front();
    net::io_context& io = main_worker.io();

    tcp::endpoint endpoint(net::ip::make_address(config_.listen.address), config_.listen.port);
    uint16_t port = main_worker.listen(endpoint);
    endpoint.port(port);  // a configured port 0 becomes the port the first worker got
    for (size_t i = 1; i < workers_.size(); ++i) workers_[i]->listen(endpoint);

    // The shared roles before the first request: a replica that starts
    // while others run routes as they do.
    control_ = std::make_unique<control::ControlPlane>(
        config_,
        control::ControlPieces{.backends = backends_,
                               .roles = roles_,
                               .records = records_,
                               .metrics = metrics_,
                               .acceptance_changed = [this] { refreshAcceptance(); }},
        version_, port);
    control_->start();
    budgets_.start();
    countReplicas();

    admin_ = std::make_unique<AdminListener>(io,
                                             AdminPieces{.backends = backends_,
                                                         .router = router_,
                                                         .metrics = metrics_,
                                                         .records = records_,
                                                         .roles = roles_,
                                                         .control = *control_,
                                                         .count_check = count_check_,
                                                         .shared_segments = *shared_segments_,
                                                         .admission_pool = *admission_pool_,
                                                         .budgets = budgets_},
                                             *this, *this);
    uint16_t admin_port =
        admin_->listen(tcp::endpoint(net::ip::make_address(config_.admin.address), config_.admin.port));
    admin_->start();

    health_ = std::make_unique<HealthChecker>(
        io, [this]() -> const conf::Config& { return config(); }, backends_);
    health_->start();

    // Records `dpgate accept` writes while dpgate runs count within a probe
    // interval; so does a backend's identity changing under its record.
    acceptance_timer_ = std::make_unique<net::steady_timer>(io);
    std::function<void(const error_code&)> on_tick = [&](const error_code& ec) {
        if (ec || shutting_down_) return;
        refreshAcceptance();
        countReplicas();
        acceptance_timer_->expires_after(ms(config().health.interval_ms));
        acceptance_timer_->async_wait(on_tick);
    };
    acceptance_timer_->expires_after(ms(config_.health.interval_ms));
    acceptance_timer_->async_wait(on_tick);

    net::signal_set signals(io, SIGINT, SIGTERM);
    signals.add(SIGHUP);
    std::function<void(const error_code&, int)> on_signal = [&](const error_code& ec, int signo) {
        if (ec) return;
        if (signo == SIGHUP) {
            if (auto refused = reload({})) logLine(LogLevel::error, "SIGHUP: reload refused: " + *refused);
            signals.async_wait(on_signal);
            return;
        }
        if (shutting_down_) {
            logLine(LogLevel::warn, "second signal: closing every connection now");
            for (auto& w : workers_) w->closeAll();
            for (auto& w : workers_) w->stop();
            return;
        }
        logLine(LogLevel::info, std::string("signal ") + (signo == SIGTERM ? "SIGTERM" : "SIGINT") +
                                    ": draining in-flight requests for up to " +
                                    std::to_string(config_.limits.drain_timeout_ms) + " ms");
        beginShutdown();
        signals.async_wait(on_signal);
    };
    signals.async_wait(on_signal);

    // Tests and scripts wait for this exact line on stdout.
    std::cout << "dpgate listening on " << config_.listen.address << ":" << port << " (admin " << config_.admin.address
              << ":" << admin_port << ", " << workers_.size() << " threads)" << std::endl;

    for (auto& w : workers_) w->start();
    for (auto& w : workers_) w->join();
    control_->stop();  // gives the membership lease back: status elsewhere drops this replica now
    budgets_.stop();   // today's counts into state.dir
    logLine(LogLevel::info, "stopped");
    return 0;
}

namespace {

// What a reload cannot change: it would need new sockets, threads, pools or
// a new tokenizer. Empty when the new config may be swapped in.
std::string restartOnlyChange(const conf::Config& running, const conf::Config& next) {
    if (running.listen.address != next.listen.address || running.listen.port != next.listen.port ||
        running.listen.tls.enabled() != next.listen.tls.enabled())
        return "listen";
    if (running.admin.address != next.admin.address || running.admin.port != next.admin.port)
        return "admin.address/admin.port";
    if (running.threads != next.threads) return "threads";
    if (running.control != next.control) return "control";
    if (running.limits.redis != next.limits.redis) return "limits.redis";
    if (running.admission_threads != next.admission_threads) return "admission_threads";
    if (running.huge_pages != next.huge_pages) return "huge_pages";
    if (running.model.id != next.model.id) return "model.id";
    if (running.model.tokenizer != next.model.tokenizer) return "model.tokenizer";
    if (running.model.chat_template != next.model.chat_template) return "model.chat_template";
    if (running.model.chat_template_content_format != next.model.chat_template_content_format)
        return "model.chat_template_content_format";
    if (running.model.count_cache_bytes != next.model.count_cache_bytes) return "model.count_cache_bytes";
    if (running.routing.mode != next.routing.mode) return "routing.mode";
    if (running.state.dir != next.state.dir) return "state.dir";
    if (running.backends.size() != next.backends.size()) return "backends";
    for (size_t i = 0; i < running.backends.size(); ++i) {
        const auto& a = running.backends[i];
        const auto& b = next.backends[i];
        // Roles are runtime state after a flip; everything else names the machine.
        if (a.name != b.name || a.url != b.url || a.dp_ranks != b.dp_ranks || a.credential_env != b.credential_env)
            return "backends[" + std::to_string(i) + "]";
    }
    return {};
}

// What a reload does to the keys, for the log: revoking keys is worth a
// warning line naming them. Empty when the set of names is unchanged.
std::string keyChange(const auth::KeyStore& before, const auth::KeyStore& after) {
    std::vector<std::string> old_names = before.keyNames();
    std::vector<std::string> new_names = after.keyNames();
    std::sort(old_names.begin(), old_names.end());
    std::sort(new_names.begin(), new_names.end());
    if (old_names == new_names) return {};
    std::vector<std::string> removed;
    std::vector<std::string> added;
    std::set_difference(old_names.begin(), old_names.end(), new_names.begin(), new_names.end(),
                        std::back_inserter(removed));
    std::set_difference(new_names.begin(), new_names.end(), old_names.begin(), old_names.end(),
                        std::back_inserter(added));
    auto listed = [](const std::vector<std::string>& names) {
        constexpr size_t kNamed = 20;
        std::string out;
        for (size_t i = 0; i < names.size() && i < kNamed; ++i) out += (i ? ", " : "") + names[i];
        if (names.size() > kNamed) out += " and " + std::to_string(names.size() - kNamed) + " more";
        return out;
    };
    std::string out = "client keys " + std::to_string(old_names.size()) + " -> " + std::to_string(new_names.size());
    if (!removed.empty()) out += "; revoked: " + listed(removed);
    if (!added.empty()) out += "; added: " + listed(added);
    return out;
}

}  // namespace

size_t Server::admissionThreads() const {
    return config_.admission_threads != 0 ? config_.admission_threads : std::max<size_t>(2, config_.threads);
}

std::optional<std::string> Server::reload(ReloadOptions options) {
    std::lock_guard lock(reload_mutex_);
    const conf::Config& running = config();
    auto next = std::make_unique<conf::Config>();
    std::shared_ptr<const auth::KeyStore> keys;
    std::shared_ptr<AccessLogSink> access_log;
    std::shared_ptr<net::ssl::context> tls;
    try {
        *next = withThreads(conf::loadConfigFile(running.source_path));
        keys = std::make_shared<const auth::KeyStore>(next->auth, next->admin);
        access_log = AccessLogSink::open(next->log.access);
        // The certificate files are read again even when their paths did not
        // change: that is how a renewed certificate is picked up.
        if (next->listen.tls.enabled()) tls = makeServerTlsContext(next->listen.tls);
    } catch (const conf::ConfigError& e) {
        return std::string(e.what());
    } catch (const std::runtime_error& e) {
        return std::string(e.what());
    }
    if (std::string key = restartOnlyChange(running, *next); !key.empty())
        return "conf: " + key + ": cannot change without a restart; the running config stays";
    if (next->auth.required && keys->keyCount() == 0 && !options.allow_no_keys)
        return "auth: the new config has no client keys (auth.keys and " +
               (next->auth.keys_file.empty() ? std::string("no keys_file") : "keys_file " + next->auth.keys_file) +
               ") while auth.required is true: every client would be refused. The running config stays; "
               "`dpgate ctl reload --allow-no-keys` reloads it anyway";
    if (!next->acceptance.dir.empty() && next->acceptance.dir != running.acceptance.dir)
        if (std::string problem = acceptance::writableDirProblem(next->acceptance.dir, "acceptance.dir");
            !problem.empty())
            return "conf: " + problem + "; the running config stays";
    const std::string key_change = keyChange(*keys_.load(), *keys);
    backends_.applyReload(next->model.window_tokens, next->routing);
    router_.applyReload(next->routing);
    records_.setDir(next->acceptance.dir);
    keys_.store(keys);
    access_log_.store(access_log);
    tls_.store(tls);
    key_limiter_.store(std::make_shared<auth::KeyLimiter>(next->auth));
    budgets_.update(*next);
    setLogLevel(parseLogLevel(next->log.level));
    const conf::Config* published = next.get();
    reloaded_.push_back(std::move(next));
    current_.store(published, std::memory_order_release);
    logLine(key_change.empty() ? LogLevel::info : LogLevel::warn,
            "reloaded " + published->source_path + (key_change.empty() ? "" : ": " + key_change));
    return std::nullopt;
}

void Server::countReplicas() {
    metrics_.budget_store_up.set(!budgets_.shared() || budgets_.storeUp() ? 1 : 0);
    if (!control_ || !control_->shared()) return;
    const size_t listed = control_->replicasJson().size();
    live_replicas_.store(uint32_t(std::max<size_t>(1, listed)), std::memory_order_relaxed);
}

void Server::refreshAcceptance() {
    records_.refresh();
    const conf::Config& config = this->config();
    for (size_t i = 0; i < backends_.size(); ++i) {
        const conf::BackendConfig& b = backends_.config(i);
        std::string why_not;
        bool matches = records_.matching(b.name, b.url, backends_.identity(i), why_not).has_value();
        backends_.setAcceptance(i, matches, records_.acceptedWindow(b.name, b.url, config.model.id));
    }
    metrics_.unaccepted_failover.set(backends_.unacceptedFailover() ? 1 : 0);
}

bool Server::evictIdleConnection(Worker& asking) {
    Worker* oldest = nullptr;
    int64_t oldest_since = IdleList::kNone;
    for (const std::unique_ptr<Worker>& worker : workers_) {
        const int64_t since = worker->oldestIdleSince();
        if (since < oldest_since) {
            oldest_since = since;
            oldest = worker.get();
        }
    }
    if (oldest == nullptr) return false;
    if (oldest == &asking) return asking.evictOldestIdle();
    // Its connection may be busy again by the time the post runs: then the
    // new connection went in without one going out (a bounded overshoot).
    oldest->postEvictOldestIdle();
    return true;
}

void Server::beginShutdown() {
    shutting_down_ = true;
    admin_->stop();
    health_->stop();
    for (auto& w : workers_) w->beginShutdown();
    drain_timer_ = std::make_unique<net::steady_timer>(workers_.front()->io());
    pollDrain(std::chrono::steady_clock::now() + ms(config_.limits.drain_timeout_ms));
}

void Server::pollDrain(std::chrono::steady_clock::time_point deadline) {
    drain_timer_->expires_after(std::chrono::milliseconds(20));
    drain_timer_->async_wait([this, deadline](const error_code& ec) {
        if (ec) return;
        bool drained = open_connections_.load() == 0;
        if (drained || std::chrono::steady_clock::now() >= deadline) {
            if (!drained) {
                logLine(LogLevel::warn, "drain deadline reached with " + std::to_string(requests_in_flight_.value()) +
                                            " requests in flight: closing them");
                for (auto& w : workers_) w->closeAll();
            }
            for (auto& w : workers_) w->stop();
            return;
        }
        pollDrain(deadline);
    });
}

}  // namespace dpgate::gateway
