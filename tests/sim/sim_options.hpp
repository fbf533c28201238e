#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fault_state.hpp"

namespace dpgate::sim {

struct SimOptions {
    std::string listen_host = "127.0.0.1";
    std::uint16_t listen_port = 8000;
    std::string port_file;  // written with the bound port once listening
    int dp_ranks = 8;
    std::uint64_t window_tokens = 1048576;
    std::string model = "ds-v4.1-flash-1017";
    std::uint64_t cache_tokens = 262144;  // per rank
    std::uint64_t prefill_us_per_token = 0;
    std::uint64_t decode_us_per_token = 0;
    // --serial-prefill: each rank prefills FCFS, one request (or, with
    // --max-batched-tokens, one step of that many tokens) at a time; see
    // prefill_queue.hpp. Off: each request's prefill is timed on its own.
    bool serial_prefill = false;
    std::uint64_t max_batched_tokens = 0;  // 0: no budget, whole prefills
    std::uint64_t max_output_tokens = 16;
    int threads = 1;
    // --tokenizer: count prompt tokens with dpgate's admission library (see
    // real_prompt_counter.hpp) instead of pseudo-tokens.
    std::string tokenizer_path;
    std::string chat_template_path;  // --chat-template (refused for now)
    FaultConfig fault;               // with --count-offset in fault.count_offset
    // --no-prompt-tokens-details: usage without prompt_tokens_details, as
    // vLLM without --enable-prompt-tokens-details answers.
    bool prompt_tokens_details = true;
    std::string version = "0.0.0-sim";  // GET /version's {"version": ...}
};

inline constexpr const char* kSimUsage =
    "usage: dpgate-sim [--listen HOST:PORT] [--port-file PATH] [--dp N]\n"
    "                  [--window TOKENS] [--model NAME] [--cache-tokens N]\n"
    "                  [--prefill-us-per-token US] [--decode-us-per-token US]\n"
    "                  [--serial-prefill [--max-batched-tokens N]]\n"
    "                  [--max-output TOKENS] [--threads N] [--fault MODE[:N]]\n"
    "                  [--tokenizer PATH [--chat-template FILE]] [--count-offset N]\n"
    "                  [--no-prompt-tokens-details] [--version TEXT]\n"
    "Fault modes: none refuse status[:CODE] hang cut_stream[:AFTER_CHUNKS]\n"
    "             slow[:CHUNK_DELAY_MS] unhealthy\n";

// Returns nullopt with `error` set on bad arguments; `error` is empty and the
// result nullopt when --help was asked.
std::optional<SimOptions> parseSimOptions(int argc, char** argv, std::string& error);

}  // namespace dpgate::sim
