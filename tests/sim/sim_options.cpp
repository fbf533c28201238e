#include "sim_options.hpp"

#include <charconv>
#include <string_view>

namespace dpgate::sim {

namespace {

bool parseUint(std::string_view text, std::uint64_t& value) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
}

// HOST:PORT, with IPv6 hosts in brackets: [::1]:8000.
bool parseListen(std::string_view text, SimOptions& options) {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return false;
    auto host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    std::uint64_t port = 0;
    if (host.empty() || !parseUint(text.substr(colon + 1), port) || port > 65535) return false;
    options.listen_host = std::string(host);
    options.listen_port = static_cast<std::uint16_t>(port);
    return true;
}

}  // namespace

std::optional<SimOptions> parseSimOptions(int argc, char** argv, std::string& error) {
    SimOptions options;
    for (int i = 1; i < argc; ++i) {
        std::string_view flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            error.clear();
            return std::nullopt;
        }
        if (flag == "--no-prompt-tokens-details") {
            options.prompt_tokens_details = false;
            continue;
        }
        if (flag == "--serial-prefill") {
            options.serial_prefill = true;
            continue;
        }
        if (i + 1 >= argc) {
            error = std::string(flag) + " needs a value (or unknown flag)";
            return std::nullopt;
        }
        std::string_view value = argv[++i];
        std::uint64_t number = 0;
        auto need_uint = [&](std::uint64_t min, std::uint64_t max) {
            if (!parseUint(value, number) || number < min || number > max) {
                error = std::string(flag) + ": expected an integer in [" + std::to_string(min) + ", " +
                        std::to_string(max) + "], got \"" + std::string(value) + "\"";
                return false;
            }
            return true;
        };
        constexpr std::uint64_t kHuge = std::uint64_t{1} << 40;
        if (flag == "--listen") {
            if (!parseListen(value, options)) {
                error = "--listen: expected HOST:PORT, got \"" + std::string(value) + "\"";
                return std::nullopt;
            }
        } else if (flag == "--port-file") {
            options.port_file = std::string(value);
        } else if (flag == "--model") {
            options.model = std::string(value);
        } else if (flag == "--dp") {
            if (!need_uint(1, 1024)) return std::nullopt;
            options.dp_ranks = static_cast<int>(number);
        } else if (flag == "--window") {
            if (!need_uint(1, kHuge)) return std::nullopt;
            options.window_tokens = number;
        } else if (flag == "--cache-tokens") {
            if (!need_uint(0, kHuge)) return std::nullopt;
            options.cache_tokens = number;
        } else if (flag == "--prefill-us-per-token") {
            if (!need_uint(0, 10'000'000)) return std::nullopt;
            options.prefill_us_per_token = number;
        } else if (flag == "--decode-us-per-token") {
            if (!need_uint(0, 100'000'000)) return std::nullopt;
            options.decode_us_per_token = number;
        } else if (flag == "--max-batched-tokens") {
            if (!need_uint(1, kHuge)) return std::nullopt;
            options.max_batched_tokens = number;
        } else if (flag == "--max-output") {
            if (!need_uint(1, 1'000'000)) return std::nullopt;
            options.max_output_tokens = number;
        } else if (flag == "--threads") {
            if (!need_uint(1, 256)) return std::nullopt;
            options.threads = static_cast<int>(number);
        } else if (flag == "--fault") {
            auto fault = parseFaultSpec(value, error);
            if (!fault) return std::nullopt;
            fault->count_offset = options.fault.count_offset;
            options.fault = *fault;
        } else if (flag == "--tokenizer") {
            options.tokenizer_path = std::string(value);
        } else if (flag == "--chat-template") {
            options.chat_template_path = std::string(value);
        } else if (flag == "--version") {
            if (value.empty() || value.size() > 100) {
                error = "--version: expected a short version string";
                return std::nullopt;
            }
            options.version = std::string(value);
        } else if (flag == "--count-offset") {
            std::int64_t offset = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), offset);
            if (ec != std::errc{} || end != value.data() + value.size() || value.empty() || offset < -kMaxCountOffset ||
                offset > kMaxCountOffset) {
                error = "--count-offset: expected an integer in [-" + std::to_string(kMaxCountOffset) + ", " +
                        std::to_string(kMaxCountOffset) + "], got \"" + std::string(value) + "\"";
                return std::nullopt;
            }
            options.fault.count_offset = offset;
        } else {
            error = "unknown flag " + std::string(flag);
            return std::nullopt;
        }
    }
    if (!options.chat_template_path.empty() && options.tokenizer_path.empty()) {
        error = "--chat-template needs --tokenizer";
        return std::nullopt;
    }
    if (options.max_batched_tokens != 0 && !options.serial_prefill) {
        error = "--max-batched-tokens needs --serial-prefill";
        return std::nullopt;
    }
    return options;
}

}  // namespace dpgate::sim
