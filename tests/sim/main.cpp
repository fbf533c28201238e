// dpgate-sim: a stand-in for one 950DT inference container (vLLM's
// OpenAI-compatible server with N data-parallel ranks). See http_session.hpp
// for the routes and fault_state.hpp for the faults.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "sim_context.hpp"
#include "sim_options.hpp"
#include "sim_server.hpp"

namespace {

// Written to a temporary name and renamed, so a test polling the file never
// reads a half-written port.
bool writePortFile(const std::string& path, unsigned port) {
    std::string temporary = path + ".tmp";
    {
        std::ofstream out(temporary, std::ios::trunc);
        if (!(out << port << '\n')) return false;
    }
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    return !ec;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace dpgate::sim;
    std::string error;
    auto options = parseSimOptions(argc, argv, error);
    if (!options) {
        std::cerr << (error.empty() ? "" : "dpgate-sim: " + error + "\n") << kSimUsage;
        return error.empty() ? 0 : 2;
    }
    std::signal(SIGPIPE, SIG_IGN);

    // Declared before the io_context so it outlives the sessions it destroys.
    SimContext context(*options);
    if (!options->tokenizer_path.empty()) {
        context.real_counter = RealPromptCounter::load(options->tokenizer_path, options->chat_template_path, error);
        if (!context.real_counter) {
            std::cerr << "dpgate-sim: " << error << "\n";
            return 2;
        }
    }
    boost::asio::io_context io(options->threads);
    SimServer server(io, context);
    boost::asio::ip::tcp::endpoint endpoint;
    try {
        endpoint = server.listen();
    } catch (const std::exception& e) {
        std::cerr << "dpgate-sim: cannot listen on " << options->listen_host << ":" << options->listen_port << ": "
                  << e.what() << "\n";
        return 1;
    }
    if (!options->port_file.empty() && !writePortFile(options->port_file, endpoint.port())) {
        std::cerr << "dpgate-sim: cannot write --port-file " << options->port_file << "\n";
        return 1;
    }
    server.start();

    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&io](const boost::system::error_code&, int) { io.stop(); });

    std::string host =
        options->listen_host.find(':') != std::string::npos ? "[" + options->listen_host + "]" : options->listen_host;
    std::cout << "dpgate-sim listening on " << host << ":" << endpoint.port() << std::endl;

    std::vector<std::thread> workers;
    for (int i = 1; i < options->threads; ++i) workers.emplace_back([&io] { io.run(); });
    io.run();
    for (auto& worker : workers) worker.join();
    return 0;
}
