#include "gateway/metrics/backend_metrics.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>

namespace dpgate::metrics {

namespace {

enum Field : size_t {
    kRunning,
    kWaiting,
    kKvUsage,
    kQueries,
    kHits,
    kHitRateGauge,  // vLLM v0's own ratio, used only when the counters are missing
    kPrompt,
    kGeneration,
    kPreemptions,
    kFieldCount,
};

struct KnownName {
    std::string_view name;
    Field field;
    int priority;  // lower wins when a page carries two names for one field
};

// vLLM v1 names first; v1's early gpu_-prefixed cache counters and v0's
// gauges after them. Counters are matched with and without `_total`: the
// 0.0.4 text format from prometheus_client always adds it, but a hand-written
// exporter (or OpenMetrics-minded one) may not.
constexpr std::array<KnownName, 19> kKnownNames{{
    {"vllm:num_requests_running", kRunning, 0},
    {"vllm:num_requests_waiting", kWaiting, 0},
    {"vllm:kv_cache_usage_perc", kKvUsage, 0},
    {"vllm:gpu_cache_usage_perc", kKvUsage, 1},
    {"vllm:prefix_cache_queries_total", kQueries, 0},
    {"vllm:prefix_cache_queries", kQueries, 0},
    {"vllm:gpu_prefix_cache_queries_total", kQueries, 1},
    {"vllm:gpu_prefix_cache_queries", kQueries, 1},
    {"vllm:prefix_cache_hits_total", kHits, 0},
    {"vllm:prefix_cache_hits", kHits, 0},
    {"vllm:gpu_prefix_cache_hits_total", kHits, 1},
    {"vllm:gpu_prefix_cache_hits", kHits, 1},
    {"vllm:gpu_prefix_cache_hit_rate", kHitRateGauge, 0},
    {"vllm:prompt_tokens_total", kPrompt, 0},
    {"vllm:prompt_tokens", kPrompt, 0},
    {"vllm:generation_tokens_total", kGeneration, 0},
    {"vllm:generation_tokens", kGeneration, 0},
    {"vllm:num_preemptions_total", kPreemptions, 0},
    {"vllm:num_preemptions", kPreemptions, 0},
}};

const KnownName* lookup(std::string_view name) {
    if (!name.starts_with("vllm:")) return nullptr;
    for (const auto& known : kKnownNames) {
        if (known.name == name) return &known;
    }
    return nullptr;
}

bool isBlank(char c) { return c == ' ' || c == '\t'; }
bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

struct Sample {
    std::string_view name;
    std::string_view engine;  // raw (still escaped) value of the engine label
    bool has_engine = false;
    bool engine_escaped = false;  // the value held a backslash escape
    double value = 0;
};

// One line of the text format, left to right; every step either advances or
// fails, so a line costs time linear in its length.
class LineParser {
public:
    explicit LineParser(std::string_view line) : s_(line) {}

    bool parse(Sample& out) {
        skipBlanks();
        if (!readName(out.name, /*metric=*/true)) return false;
        skipBlanks();
        if (peek() == '{' && !readLabels(out)) return false;
        skipBlanks();
        if (!readValue(out.value)) return false;
        skipBlanks();
        if (i_ < s_.size() && !readTimestamp()) return false;
        skipBlanks();
        return i_ == s_.size();
    }

private:
    char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
    void skipBlanks() {
        while (i_ < s_.size() && isBlank(s_[i_])) ++i_;
    }

    // Metric names may hold ':'; label names may not.
    bool readName(std::string_view& name, bool metric) {
        const size_t start = i_;
        if (i_ >= s_.size() || !(isAlpha(s_[i_]) || (metric && s_[i_] == ':'))) return false;
        ++i_;
        while (i_ < s_.size() && (isAlpha(s_[i_]) || isDigit(s_[i_]) || (metric && s_[i_] == ':'))) ++i_;
        name = s_.substr(start, i_ - start);
        return true;
    }

    bool readLabels(Sample& out) {
        ++i_;  // '{'
        skipBlanks();
        while (peek() != '}') {
            std::string_view label;
            if (!readName(label, /*metric=*/false)) return false;
            skipBlanks();
            if (peek() != '=') return false;
            ++i_;
            skipBlanks();
            if (peek() != '"') return false;
            ++i_;
            const size_t start = i_;
            bool escaped = false;
            while (true) {
                if (i_ >= s_.size()) return false;
                const char c = s_[i_];
                if (c == '"') break;
                if (c == '\\') {
                    // The format defines exactly three escapes.
                    if (i_ + 1 >= s_.size()) return false;
                    const char next = s_[i_ + 1];
                    if (next != '\\' && next != '"' && next != 'n') return false;
                    escaped = true;
                    i_ += 2;
                    continue;
                }
                ++i_;
            }
            if (label == "engine") {
                if (out.has_engine) return false;  // one label name twice
                out.has_engine = true;
                out.engine = s_.substr(start, i_ - start);
                out.engine_escaped = escaped;
            }
            ++i_;  // closing quote
            skipBlanks();
            if (peek() == ',') {
                ++i_;
                skipBlanks();
            } else if (peek() != '}') {
                return false;
            }
        }
        ++i_;  // '}'
        return true;
    }

    std::string_view token() {
        const size_t start = i_;
        while (i_ < s_.size() && !isBlank(s_[i_])) ++i_;
        return s_.substr(start, i_ - start);
    }

    // Go's ParseFloat syntax as Prometheus writes it: decimals, exponents,
    // NaN, +Inf, -Inf. from_chars takes no leading '+', so that is peeled off.
    bool readValue(double& value) {
        std::string_view t = token();
        if (t.starts_with('+')) {
            t.remove_prefix(1);
            if (t.starts_with('+') || t.starts_with('-')) return false;
        }
        if (t.empty()) return false;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value, std::chars_format::general);
        return ec == std::errc() && end == t.data() + t.size();
    }

    // Milliseconds since the epoch; read for validity, otherwise ignored
    // (the table is a snapshot of this one scrape).
    bool readTimestamp() {
        std::string_view t = token();
        if (t.starts_with('-')) t.remove_prefix(1);
        return !t.empty() && t.size() <= 19 && std::all_of(t.begin(), t.end(), isDigit);
    }

    std::string_view s_;
    size_t i_ = 0;
};

std::optional<int> rankOf(const Sample& sample) {
    if (!sample.has_engine) return 0;  // a single-engine vLLM (v0) labels no engine
    const std::string_view v = sample.engine;
    if (sample.engine_escaped || v.empty() || v.size() > 4) return std::nullopt;
    int rank = 0;
    for (char c : v) {
        if (!isDigit(c)) return std::nullopt;
        rank = rank * 10 + (c - '0');
    }
    if (rank > kMaxBackendRank) return std::nullopt;
    return rank;
}

struct FieldAcc {
    double value = 0;
    int priority = 0;
    bool present = false;
};

using RankAcc = std::array<FieldAcc, kFieldCount>;

void accumulate(FieldAcc& acc, const KnownName& known, double value) {
    if (!acc.present || known.priority < acc.priority) {
        acc = {value, known.priority, true};
    } else if (known.priority == acc.priority) {
        // Ratios do not add up across series; counts do.
        if (known.field == kKvUsage || known.field == kHitRateGauge) acc.value = std::max(acc.value, value);
        else acc.value += value;  // may overflow to +Inf: dropped when the row is built
    }
}

std::optional<double> finite(const FieldAcc& acc) {
    if (!acc.present || !std::isfinite(acc.value)) return std::nullopt;
    return acc.value;
}

BackendRankRow buildRow(int rank, const RankAcc& acc) {
    BackendRankRow row;
    row.rank = rank;
    row.running = finite(acc[kRunning]);
    row.waiting = finite(acc[kWaiting]);
    row.kv_cache_usage = finite(acc[kKvUsage]);
    row.prefix_cache_queries = finite(acc[kQueries]);
    row.prefix_cache_hits = finite(acc[kHits]);
    row.prompt_tokens = finite(acc[kPrompt]);
    row.generation_tokens = finite(acc[kGeneration]);
    row.preemptions = finite(acc[kPreemptions]);
    if (row.prefix_cache_queries && row.prefix_cache_hits) {
        const double queries = *row.prefix_cache_queries;
        const double hits = *row.prefix_cache_hits;
        // hits > queries is a broken page, not a ratio above 1.
        if (queries > 0 && hits <= queries) row.prefix_cache_hit_ratio = hits / queries;
    } else if (!acc[kQueries].present && !acc[kHits].present) {
        const auto gauge = finite(acc[kHitRateGauge]);
        if (gauge && *gauge <= 1) row.prefix_cache_hit_ratio = gauge;
    }
    return row;
}

}  // namespace

const BackendRankRow* BackendRankTable::find(int rank) const {
    const auto it =
        std::lower_bound(rows.begin(), rows.end(), rank, [](const BackendRankRow& row, int r) { return row.rank < r; });
    return it != rows.end() && it->rank == rank ? &*it : nullptr;
}

BackendRankTable parseBackendMetrics(std::string_view text) {
    BackendRankTable table;
    std::map<int, RankAcc> ranks;  // at most kMaxBackendRank + 1 entries
    while (!text.empty()) {
        const size_t eol = text.find('\n');
        std::string_view line = text.substr(0, eol);
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
        if (line.ends_with('\r')) line.remove_suffix(1);

        size_t first = 0;
        while (first < line.size() && isBlank(line[first])) ++first;
        if (first == line.size() || line[first] == '#') continue;  // blank, HELP, TYPE, comment

        Sample sample;
        if (!LineParser(line).parse(sample)) {
            ++table.parse_errors;
            continue;
        }
        const KnownName* known = lookup(sample.name);
        if (known == nullptr) continue;
        const std::optional<int> rank = rankOf(sample);
        if (!rank) {
            ++table.parse_errors;
            continue;
        }
        RankAcc& acc = ranks[*rank];
        // NaN, infinities and negative counts say nothing usable about a rank.
        if (!std::isfinite(sample.value) || sample.value < 0) continue;
        accumulate(acc[known->field], *known, sample.value + 0.0);  // + 0.0 turns -0 into 0
        ++table.samples_used;
    }
    table.rows.reserve(ranks.size());
    for (const auto& [rank, acc] : ranks) table.rows.push_back(buildRow(rank, acc));
    return table;
}

nlohmann::json backendRankTableJson(const BackendRankTable& table) {
    auto value = [](const std::optional<double>& v) -> nlohmann::json {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    auto ranks = nlohmann::json::array();
    for (const auto& row : table.rows) {
        ranks.push_back({
            {"rank", row.rank},
            {"running", value(row.running)},
            {"waiting", value(row.waiting)},
            {"kv_cache_usage", value(row.kv_cache_usage)},
            {"prefix_cache_queries", value(row.prefix_cache_queries)},
            {"prefix_cache_hits", value(row.prefix_cache_hits)},
            {"prefix_cache_hit_ratio", value(row.prefix_cache_hit_ratio)},
            {"prompt_tokens", value(row.prompt_tokens)},
            {"generation_tokens", value(row.generation_tokens)},
            {"preemptions", value(row.preemptions)},
        });
    }
    return {{"ranks", std::move(ranks)}, {"parse_errors", table.parse_errors}};
}

}  // namespace dpgate::metrics
