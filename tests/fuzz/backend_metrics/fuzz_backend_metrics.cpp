// Feeds arbitrary bytes to parseBackendMetrics as a backend's /metrics page.
// The contract: no crash, no exception, a table whose every number is usable
// (finite, non-negative, ratios within [0, 1], ranks sorted and in bounds),
// the same table on a second parse and with CRLF line ends, and one more
// parse error, nothing else, for one appended garbage line.
#include "gateway/metrics/backend_metrics.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

using dpgate::metrics::BackendRankRow;
using dpgate::metrics::BackendRankTable;
using dpgate::metrics::parseBackendMetrics;

namespace {

void checkValue(const std::optional<double>& value) {
    if (value && !(std::isfinite(*value) && *value >= 0)) __builtin_trap();
}

void checkTable(const BackendRankTable& table, std::string_view input) {
    int previous_rank = -1;
    for (const BackendRankRow& row : table.rows) {
        if (row.rank <= previous_rank || row.rank > dpgate::metrics::kMaxBackendRank) __builtin_trap();
        previous_rank = row.rank;
        for (const auto* v :
             {&row.running, &row.waiting, &row.kv_cache_usage, &row.prefix_cache_queries, &row.prefix_cache_hits,
              &row.prefix_cache_hit_ratio, &row.prompt_tokens, &row.generation_tokens, &row.preemptions}) {
            checkValue(*v);
        }
        if (row.prefix_cache_hit_ratio && *row.prefix_cache_hit_ratio > 1) __builtin_trap();
        if (table.find(row.rank) != &row) __builtin_trap();
    }
    size_t lines = 1;
    for (char c : input) lines += c == '\n';
    if (table.parse_errors + table.samples_used > lines) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const BackendRankTable table = parseBackendMetrics(input);
    checkTable(table, input);
    if (parseBackendMetrics(input) != table) __builtin_trap();
    (void)dpgate::metrics::backendRankTableJson(table).dump();

    if (input.find('\r') == std::string_view::npos) {
        std::string crlf;
        crlf.reserve(size + size / 8);
        for (char c : input) {
            if (c == '\n') crlf += '\r';
            crlf += c;
        }
        if (parseBackendMetrics(crlf) != table) __builtin_trap();
    }

    const std::string ended = std::string(input) + "\n";
    const BackendRankTable base = parseBackendMetrics(ended);
    BackendRankTable with_garbage = parseBackendMetrics(ended + "}garbage{\n");
    if (with_garbage.parse_errors != base.parse_errors + 1) __builtin_trap();
    with_garbage.parse_errors = base.parse_errors;
    if (with_garbage != base) __builtin_trap();
    return 0;
}
