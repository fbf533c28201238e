// Acceptance records and state files: parse, and what parses round-trips.
#include "gateway/acceptance/acceptance_record.hpp"
#include "gateway/acceptance/role_state.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace dpgate::acceptance;
    std::string_view text(reinterpret_cast<const char*>(data), size);
    std::string error;
    if (std::optional<AcceptanceRecord> record = parseRecord(text, error)) {
        std::string again_error;
        std::optional<AcceptanceRecord> again = parseRecord(recordJson(*record), again_error);
        if (!again || !(*again == *record)) std::abort();
        (void)identityDifferences(record->identity, again->identity);
        if (!compareRecords(*record, *again).empty()) std::abort();
    } else if (error.empty()) {
        std::abort();  // a refusal always says why
    }
    error.clear();
    if (std::optional<RoleState> state = parseState(text, error)) {
        std::string again_error;
        std::optional<RoleState> again = parseState(stateJson(*state), again_error);
        if (!again || !(*again == *state)) std::abort();
    } else if (error.empty()) {
        std::abort();
    }
    return 0;
}
