#include "gateway/server.hpp"

#include "gateway/admin_listener.hpp"
#include "gateway/health_checker.hpp"
#include "gateway/log.hpp"
#include "gateway/worker.hpp"

#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <iostream>
#include <thread>

namespace dpgate::gateway {

namespace {
conf::Config withThreads(conf::Config config) {
    if (config.threads == 0) config.threads = std::max(1u, std::thread::hardware_concurrency());
    return config;
}

// Counting is what admission rests on: a configured tokenizer that does not
// load stops the process instead of letting requests through uncounted.
std::shared_ptr<const admission::Tokenizer> loadTokenizer(const conf::ModelConfig& model) {
    if (model.tokenizer.empty()) {
        logLine(LogLevel::warn, "model.tokenizer is not set: requests that need an exact count get 503");
        return nullptr;
    }
    admission::TokenizerLoad load = admission::Tokenizer::load(model.tokenizer);
    if (!load.tokenizer) throw std::runtime_error("model.tokenizer: " + model.tokenizer + ": " + load.error);
    return load.tokenizer;
}
}  // namespace

Server::Server(conf::Config config)
    : config_(withThreads(std::move(config))),
      tokenizer_(loadTokenizer(config_.model)),
      keys_(config_.auth, config_.admin),
      key_limiter_(config_.auth),
      backends_(config_) {
    for (size_t i = 0; i < config_.threads; ++i) workers_.push_back(std::make_unique<Worker>(*this, i));
}

Server::~Server() {
    // I/O objects that live on a worker's io_context go before the workers.
    drain_timer_.reset();
    admin_.reset();
    health_.reset();
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

    admin_ = std::make_unique<AdminListener>(io, *this);
    uint16_t admin_port =
        admin_->listen(tcp::endpoint(net::ip::make_address(config_.admin.address), config_.admin.port));
    admin_->start();

    health_ = std::make_unique<HealthChecker>(io, config_, backends_);
    health_->start();

    net::signal_set signals(io, SIGINT, SIGTERM);
    std::function<void(const error_code&, int)> on_signal = [&](const error_code& ec, int signo) {
        if (ec) return;
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
    std::cout << "dpgate listening on " << config_.listen.address << ":" << port << " (admin "
              << config_.admin.address << ":" << admin_port << ", " << workers_.size() << " threads)"
              << std::endl;

    for (auto& w : workers_) w->start();
    for (auto& w : workers_) w->join();
    logLine(LogLevel::info, "stopped");
    return 0;
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
                logLine(LogLevel::warn, "drain deadline reached with " + std::to_string(requests_in_flight_.load()) +
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
