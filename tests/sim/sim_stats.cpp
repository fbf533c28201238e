#include "sim_stats.hpp"

#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace dpgate::sim {

namespace {

std::string sha256Hex(std::string_view bytes) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_size = 0;
    EVP_Digest(bytes.data(), bytes.size(), digest, &digest_size, EVP_sha256(), nullptr);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(digest_size * 2);
    for (unsigned int i = 0; i < digest_size; ++i) {
        hex += kHex[digest[i] >> 4];
        hex += kHex[digest[i] & 0xF];
    }
    return hex;
}

struct MetricFamily {
    const char* name;
    const char* type;
    const char* help;
    std::uint64_t (*read)(const RankCounters&);
};

// Names, types and help texts as vLLM v1 exports them.
const MetricFamily kFamilies[] = {
    {"vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
     [](const RankCounters& c) {
         return static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.running.load() - c.waiting.load()));
     }},
    {"vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
     [](const RankCounters& c) { return static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.waiting.load())); }},
    {"vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
     [](const RankCounters& c) { return c.cache_query_tokens.load(); }},
    {"vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
     [](const RankCounters& c) { return c.cache_hit_tokens.load(); }},
    {"vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
     [](const RankCounters& c) { return c.prompt_tokens.load(); }},
    {"vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
     [](const RankCounters& c) { return c.generation_tokens.load(); }},
};

void appendLabelValue(std::string& out, std::string_view value) {
    // Prometheus label values escape backslash, quote and newline.
    for (char c : value) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
}

}  // namespace

SimStats::SimStats(int dp_ranks)
    : dp_ranks_(dp_ranks), ranks_(std::make_unique<RankCounters[]>(static_cast<std::size_t>(dp_ranks))) {}

void SimStats::recordRequest(std::string_view method, std::string_view target,
                             std::vector<std::pair<std::string, std::string>> headers, std::string_view body) {
    std::string digest = sha256Hex(body);
    std::lock_guard lock(last_mutex_);
    last_method_.assign(method);
    last_target_.assign(target);
    last_headers_ = std::move(headers);
    last_body_sha256_ = std::move(digest);
    last_body_bytes_ = body.size();
}

std::string SimStats::statsJson() const {
    nlohmann::json doc;
    doc["requests"] = requests.load();
    doc["cancelled"] = cancelled.load();
    doc["in_flight"] = in_flight.load();
    auto by_rank = nlohmann::json::array();
    auto running = nlohmann::json::array();
    auto waiting = nlohmann::json::array();
    auto queued_tokens = nlohmann::json::array();
    for (int r = 0; r < dp_ranks_; ++r) {
        const auto& c = ranks_[static_cast<std::size_t>(r)];
        by_rank.push_back(c.served.load());
        running.push_back(c.running.load() - c.waiting.load());
        waiting.push_back(c.waiting.load());
        queued_tokens.push_back(c.queued_prefill_tokens.load());
    }
    doc["by_rank"] = std::move(by_rank);
    doc["running_by_rank"] = std::move(running);
    doc["waiting_by_rank"] = std::move(waiting);
    doc["queued_prefill_tokens_by_rank"] = std::move(queued_tokens);
    std::lock_guard lock(last_mutex_);
    // Repeated header names are joined with ", " as HTTP allows.
    auto headers = nlohmann::json::object();
    for (const auto& [name, value] : last_headers_) {
        auto& slot = headers[name];
        if (slot.is_null()) slot = value;
        else slot = slot.get<std::string>() + ", " + value;
    }
    doc["last_request_method"] = last_method_;
    doc["last_request_target"] = last_target_;
    doc["last_request_headers"] = std::move(headers);
    doc["last_request_header_list"] = last_headers_;
    doc["last_request_body_sha256"] = last_body_sha256_;
    doc["last_request_body_bytes"] = last_body_bytes_;
    return doc.dump();
}

std::string SimStats::metricsText(std::string_view model) const {
    std::string out;
    out.reserve(4096);
    for (const auto& family : kFamilies) {
        out += "# HELP ";
        out += family.name;
        out += ' ';
        out += family.help;
        out += "\n# TYPE ";
        out += family.name;
        out += ' ';
        out += family.type;
        out += '\n';
        for (int r = 0; r < dp_ranks_; ++r) {
            out += family.name;
            out += "{engine=\"";
            out += std::to_string(r);
            out += "\",model_name=\"";
            appendLabelValue(out, model);
            out += "\"} ";
            out += std::to_string(family.read(ranks_[static_cast<std::size_t>(r)]));
            out += ".0\n";
        }
    }
    return out;
}

void SimStats::reset() {
    requests = 0;
    cancelled = 0;
    for (int r = 0; r < dp_ranks_; ++r) {
        auto& c = ranks_[static_cast<std::size_t>(r)];
        c.served = 0;
        c.prompt_tokens = 0;
        c.generation_tokens = 0;
        c.cache_query_tokens = 0;
        c.cache_hit_tokens = 0;
    }
    std::lock_guard lock(last_mutex_);
    last_method_.clear();
    last_target_.clear();
    last_headers_.clear();
    last_body_sha256_.clear();
    last_body_bytes_ = 0;
}

}  // namespace dpgate::sim
