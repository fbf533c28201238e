// Feeds arbitrary bytes to loadConfigText. The loader's contract: every input
// yields a Config or a ConfigError. Anything else escaping (a yaml-cpp
// exception, std::out_of_range, ...) aborts here and is a finding.
#include "conf/config.hpp"
#include "conf/keys_file.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    // check_files=false: the fuzzer must not read /dev/zero because an input
    // named it as auth.keys_file.
    try {
        const dpgate::conf::Config config = dpgate::conf::loadConfigText(text, "/nonexistent", {.check_files = false});
        // A Config that loaded must satisfy the loader's own invariants.
        if (config.backends.empty()) __builtin_trap();
        if (config.model.max_output_tokens > config.model.window_tokens) __builtin_trap();
        if (config.routing.balance_factor < 1) __builtin_trap();
    } catch (const dpgate::conf::ConfigError& e) {
        if (e.what()[0] != 'c') __builtin_trap();  // always "conf: ..."
    }
    // The keys-file grammar is a second parser of the same bytes.
    try {
        (void)dpgate::conf::parseKeysText(text, "keys.yaml");
    } catch (const dpgate::conf::ConfigError&) {
    }
    return 0;
}
