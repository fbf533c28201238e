// dpgate-replay: offline replay of a Mooncake-format trace through the
// routing code the gateway uses, beside peer policies, under one simple
// model of a DP rank: an LRU prefix cache of N 512-token blocks and one FIFO
// prefill queue at R tokens/s (decode is batched and not modelled).
// Prints one JSON object per run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "routing/affinity_key.hpp"
#include "routing/cache_estimate.hpp"
#include "routing/hash64.hpp"
#include "routing/slot_chooser.hpp"
#include "routing/work_meter.hpp"
#include "tests/bench/replay/block_lru.hpp"

namespace dpgate::replay {
namespace {

constexpr double block_tokens = 512;

struct TraceRequest {
    double timestamp_ms;
    double input_tokens;
    std::vector<uint64_t> hash_ids;
};

struct Options {
    std::string trace_path;
    std::string policy = "dpgate";
    size_t slots = 16;
    size_t cache_blocks = 1024;
    double speedup = 1;
    double prefill_tokens_per_s = 50'000;
    // --balance-factor, --slack-requests, --slack-tokens, --work-factor, --work-slack
    routing::SlotChooserOptions chooser;
    size_t shared_prefix_blocks = 0;
    bool estimate = true;        // dpgate: loads in tokens not expected in cache (routing::CacheEstimate)
    double work_window_s = 300;  // dpgate: routing.work_window_s
    size_t replicas = 1;
    std::string text_salt;         // varies the message bytes, to see how much a result owes to hash luck
    std::string per_request_path;  // --per-request FILE: one CSV row per request (compare_runs.py reads two)
    // dpgate --work-poll-s P: the work meter is fed from what every slot
    // computed (the backends' prefix-cache counters, which all replicas read
    // alike), polled every P seconds, instead of from this gateway's own
    // routing (routing.work_source: backends). 0 = the gateway's own.
    double work_poll_s = 0;
};

// What a policy sees when it places one request.
struct SlotState {
    std::vector<double> queued_tokens;    // uncached prefill work not yet done, per slot
    std::vector<size_t> queued_requests;  // requests not yet past prefill, per slot
    std::vector<double> done_tokens;      // prefill work assigned so far, per slot
    const std::vector<BlockLru>* caches;  // per slot
};

// Each hash id becomes one message; the text is derived from the id so equal
// ids give equal bytes (the prompt a client would resend).
// With --shared-prefix-blocks K, the K shared blocks together are the system
// message (one agent's long system prompt and tools) and the trace's own ids
// follow as user/assistant turns.
struct ChatBody {
    std::vector<std::string> texts;
    routing::ConversationView view;

    ChatBody(const std::vector<uint64_t>& ids, size_t shared_prefix_blocks, const std::string& salt) {
        size_t first_turn = std::max<size_t>(1, std::min(shared_prefix_blocks, ids.size()));
        std::string system;
        for (size_t i = 0; i < first_turn; ++i) system += salt + "block " + std::to_string(ids[i]) + " of 512 tokens\n";
        texts.push_back(std::move(system));
        for (size_t i = first_turn; i < ids.size(); ++i)
            texts.push_back(salt + "block " + std::to_string(ids[i]) + " of 512 tokens");
        for (size_t i = 0; i < texts.size(); ++i) {
            std::string_view role = i == 0 ? "system" : (i % 2 == 1 ? "user" : "assistant");
            view.messages.push_back({role, texts[i]});
        }
    }
};

class Policy {
public:
    virtual ~Policy() = default;
    virtual size_t place(const TraceRequest& request, const SlotState& state) = 0;
    // The slot computed `uncached_tokens` of the request just placed there
    // (the gateway learns it from the answer's usage).
    virtual void computed(size_t /*slot*/, double /*uncached_tokens*/) {}
    // A poll of the slots' counters: prefill tokens each slot has computed
    // since the start (all gateways' requests), at `now_s`.
    virtual void polled(const std::vector<double>& /*computed_total*/, double /*now_s*/) {}
    virtual nlohmann::json extra() const { return nlohmann::json::object(); }
};

class RoundRobin : public Policy {
public:
    explicit RoundRobin(size_t slots) : slots_(slots) {}
    size_t place(const TraceRequest&, const SlotState&) override { return next_++ % slots_; }

private:
    size_t slots_;
    size_t next_ = 0;
};

// Least queued prefill work; ties (an idle system) rotate, so an idle
// system does not send everything to slot 0.
class LeastLoaded : public Policy {
public:
    size_t place(const TraceRequest&, const SlotState& state) override {
        const auto& q = state.queued_tokens;
        size_t n = q.size(), best = next_ % n;
        for (size_t i = 1; i < n; ++i) {
            size_t s = (next_ + i) % n;
            if (q[s] < q[best]) best = s;
        }
        next_ = best + 1;
        return best;
    }

private:
    size_t next_ = 0;
};

// A proxy that hashes the first bytes of the body: the system prompt.
class FirstBlockHash : public Policy {
public:
    FirstBlockHash(size_t slots, const Options& o)
        : slots_(slots), shared_prefix_blocks_(o.shared_prefix_blocks), salt_(o.text_salt) {}
    size_t place(const TraceRequest& request, const SlotState&) override {
        ChatBody body(request.hash_ids, shared_prefix_blocks_, salt_);
        return routing::hashBytes(std::string_view(body.texts.front()).substr(0, 2048), 7) % slots_;
    }

private:
    size_t slots_;
    size_t shared_prefix_blocks_;
    std::string salt_;
};

// SGLang router's cache_aware policy: when the in-flight request counts are
// imbalanced (max - min > abs and max > rel * min) go to the least loaded;
// otherwise go to the worker whose approximate tree matches the longest
// prefix if the match covers more than cache_threshold of the prompt, else
// to the worker with the smallest tree. Defaults as SGLang documents them
// (cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5).
// The router's tree holds what it sent to each worker and does not see the
// worker's evictions (SGLang trims it only at max_tree_size, far above one
// rank's cache): that is what makes it approximate.
class CacheAware : public Policy {
public:
    // What prefix match and tree size are measured in. SGLang's tree counts
    // characters of text (tenant_char_count), so a short request weighs
    // little: `tokens` is that here. `blocks` counts every request's partial
    // last block as a whole 512-token block (this replay's first model of
    // the peer, kept as `cache-aware-blocks` because it scores differently).
    enum class Unit { tokens, blocks };

    CacheAware(size_t slots, Unit unit) : trees_(slots, BlockLru(SIZE_MAX)), tree_tokens_(slots, 0), unit_(unit) {}

    size_t place(const TraceRequest& request, const SlotState& state) override {
        const auto& counts = state.queued_requests;
        auto [min_it, max_it] = std::minmax_element(counts.begin(), counts.end());
        size_t chosen;
        std::optional<size_t> chosen_hits;  // the tree's prefix hits at `chosen`, if already looked up
        if (double(*max_it - *min_it) > abs_threshold_ && double(*max_it) > rel_threshold_ * double(*min_it)) {
            chosen = size_t(min_it - counts.begin());
        } else {
            size_t best = 0, best_hits = 0;
            for (size_t s = 0; s < trees_.size(); ++s) {
                size_t hits = trees_[s].prefixHits(request.hash_ids);
                if (hits > best_hits) best = s, best_hits = hits;
            }
            double match = 0;
            if (unit_ == Unit::tokens && request.input_tokens > 0)
                match = std::min(1.0, double(best_hits) * block_tokens / request.input_tokens);
            else if (unit_ == Unit::blocks && !request.hash_ids.empty())
                match = double(best_hits) / double(request.hash_ids.size());
            if (match > cache_threshold_) {
                chosen = best;
                chosen_hits = best_hits;
            } else {
                chosen = 0;
                for (size_t s = 1; s < trees_.size(); ++s)
                    if (treeSize(s) < treeSize(chosen)) chosen = s;
            }
        }
        if (unit_ == Unit::tokens) {
            // Mooncake ids name their whole prefix: what the tree lacks is the tail past its prefix hits.
            double hits = double(chosen_hits ? *chosen_hits : trees_[chosen].prefixHits(request.hash_ids));
            tree_tokens_[chosen] += std::max(0.0, request.input_tokens - hits * block_tokens);
        }
        trees_[chosen].touch(request.hash_ids);
        return chosen;
    }

private:
    double treeSize(size_t slot) const {
        return unit_ == Unit::tokens ? tree_tokens_[slot] : double(trees_[slot].size());
    }

    std::vector<BlockLru> trees_;
    std::vector<double> tree_tokens_;  // Unit::tokens: tokens each tree holds (a request's last block is partial)
    Unit unit_;
    double cache_threshold_ = 0.3;
    double abs_threshold_ = 64;
    double rel_threshold_ = 1.5;
};

// dpgate: the gateway's own affinityKey + SlotChooser + CacheEstimate +
// WorkMeter, used as the request path uses them (gateway/backends/router.cpp). The load it sees is each slot's
// queued prefill work; this request's cost on a slot is its prompt tokens
// minus what the estimate expects cached there; the work meter is charged
// that expectation at routing and corrected with what the slot really
// computed (the gateway corrects from the answer's usage, a response time
// later; here at once).
class Dpgate : public Policy {
public:
    explicit Dpgate(const Options& o)
        : chooser_(makeSlots(o.slots), o.chooser),
          shared_prefix_blocks_(o.shared_prefix_blocks),
          salt_(o.text_salt),
          use_estimate_(o.estimate),
          polled_work_(o.work_poll_s > 0),
          last_poll_(o.slots, 0),
          speedup_(o.speedup),
          work_(o.slots, o.work_window_s),
          slot_indexes_(o.slots),
          uncached_(o.slots),
          work_now_(o.slots) {
        for (size_t s = 0; s < o.slots; ++s) slot_indexes_[s] = s;
    }

    size_t place(const TraceRequest& request, const SlotState& state) override {
        ChatBody body(request.hash_ids, shared_prefix_blocks_, salt_);
        routing::AffinityInput input;
        input.conversation = body.view;
        uint64_t key = routing::affinityKey(input).key;
        std::optional<size_t> last_slot;
        if (use_estimate_) {
            last_slot = estimate_.uncachedTokens(key, chooser_, request.input_tokens, uncached_);
        } else {
            std::fill(uncached_.begin(), uncached_.end(), request.input_tokens);
            last_slot = estimate_.lastSlot(key, chooser_);
        }
        now_s_ = request.timestamp_ms / speedup_ / 1000.0;
        work_.values(slot_indexes_, now_s_, work_now_);
        routing::RouteRequest route{key, state.queued_tokens, uncached_, request.input_tokens, work_now_, last_slot};
        size_t chosen = chooser_.choose(route);
        if (!polled_work_) {
            charged_ = uncached_[chosen];
            work_.add(chosen, charged_, now_s_);
        }
        estimate_.record(key, chooser_.slotId(chosen), request.input_tokens);
        if (chosen != chooser_.rendezvousOrder(key).front()) ++left_home_;
        return chosen;
    }

    void computed(size_t slot, double uncached_tokens) override {
        if (!polled_work_) work_.add(slot, uncached_tokens - charged_, now_s_);
    }

    // Only called with --work-poll-s (polled_work_).
    void polled(const std::vector<double>& computed_total, double now_s) override {
        for (size_t s = 0; s < computed_total.size(); ++s) {
            work_.add(s, computed_total[s] - last_poll_[s], now_s);
            last_poll_[s] = computed_total[s];
        }
    }

    nlohmann::json extra() const override { return {{"left_home", left_home_}}; }

private:
    // 8 DP ranks per backend, as on a 950DT container.
    static std::vector<routing::Slot> makeSlots(size_t slots) {
        std::vector<routing::Slot> out;
        for (size_t i = 0; i < slots; ++i) out.push_back({i / 8, "backend-" + std::to_string(i / 8), uint32_t(i % 8)});
        return out;
    }

    routing::SlotChooser chooser_;
    size_t shared_prefix_blocks_;
    std::string salt_;
    bool use_estimate_;
    bool polled_work_;
    std::vector<double> last_poll_;
    double speedup_;
    routing::CacheEstimate estimate_;
    routing::WorkMeter work_;
    std::vector<size_t> slot_indexes_;
    std::vector<double> uncached_, work_now_;
    double now_s_ = 0, charged_ = 0;
    size_t left_home_ = 0;
};

std::unique_ptr<Policy> makePolicy(const Options& o) {
    if (o.policy == "round-robin") return std::make_unique<RoundRobin>(o.slots);
    if (o.policy == "least-loaded") return std::make_unique<LeastLoaded>();
    if (o.policy == "first-block-hash") return std::make_unique<FirstBlockHash>(o.slots, o);
    if (o.policy == "cache-aware") return std::make_unique<CacheAware>(o.slots, CacheAware::Unit::tokens);
    if (o.policy == "cache-aware-blocks") return std::make_unique<CacheAware>(o.slots, CacheAware::Unit::blocks);
    if (o.policy == "dpgate") return std::make_unique<Dpgate>(o);
    return nullptr;
}

// Shared-prefix block ids live far above any trace id.
constexpr uint64_t shared_prefix_id_base = uint64_t(1) << 48;

std::vector<TraceRequest> readTrace(const std::string& path, size_t shared_prefix_blocks) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open trace " + path);
    std::vector<TraceRequest> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        auto j = nlohmann::json::parse(line);
        TraceRequest request{j.at("timestamp").get<double>(), j.at("input_length").get<double>(), {}};
        for (size_t i = 0; i < shared_prefix_blocks; ++i) request.hash_ids.push_back(shared_prefix_id_base + i);
        for (uint64_t id : j.at("hash_ids").get<std::vector<uint64_t>>()) request.hash_ids.push_back(id);
        request.input_tokens += double(shared_prefix_blocks) * block_tokens;
        out.push_back(std::move(request));
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.timestamp_ms < b.timestamp_ms; });
    return out;
}

nlohmann::json run(const Options& o, const std::vector<TraceRequest>& trace) {
    // --replicas R: R gateways, each with its own policy state, share the
    // slots; each request reaches one of them at random (a client-side load
    // balancer does not know conversations). A gateway sees only its own
    // in-flight requests and the work it sent.
    std::vector<std::unique_ptr<Policy>> policies;
    for (size_t r = 0; r < o.replicas; ++r) {
        policies.push_back(makePolicy(o));
        if (!policies.back()) throw std::runtime_error("unknown policy " + o.policy);
    }
    std::vector<BlockLru> caches(o.slots, BlockLru(o.cache_blocks));
    BlockLru bound_cache(o.slots * o.cache_blocks);
    // The prefills each slot's FIFO has accepted and not finished: who sent
    // them, when they start and finish.
    struct Prefill {
        size_t replica;
        double start_ms, finish_ms;
    };
    std::vector<std::vector<Prefill>> prefills(o.slots);
    std::vector<double> free_at_ms(o.slots, 0), work_tokens(o.slots, 0);
    std::vector<double> ttft_ms;
    double wait_ms_total = 0;  // the queueing part of TTFT; the rest is the request's own uncached prefill
    double prompt_blocks = 0, cached_blocks = 0, bound_cached_blocks = 0;
    const double tokens_per_ms = o.prefill_tokens_per_s / 1000.0;

    std::vector<SlotState> states;
    for (size_t r = 0; r < o.replicas; ++r)
        states.push_back(
            {std::vector<double>(o.slots), std::vector<size_t>(o.slots), std::vector<double>(o.slots), &caches});
    std::ofstream per_request;
    if (!o.per_request_path.empty()) {
        per_request.open(o.per_request_path);
        if (!per_request) throw std::runtime_error("cannot write " + o.per_request_path);
        per_request.precision(12);
        per_request << "trace_ms,arrival_ms,slot,ttft_ms,wait_ms,prompt_blocks,cached_blocks\n";
    }
    std::vector<double> polled_at_ms(o.replicas, -1e300);
    uint64_t index = 0;
    for (const TraceRequest& request : trace) {
        double now_ms = request.timestamp_ms / o.speedup;
        size_t replica = o.replicas == 1 ? 0 : size_t(routing::mix64(index++ ^ 0x5eed) % o.replicas);
        if (o.work_poll_s > 0) {
            // Replica r polls at k x P + r x P / R (its own phase).
            for (size_t r = 0; r < o.replicas; ++r) {
                double period_ms = o.work_poll_s * 1000, phase_ms = period_ms * double(r) / double(o.replicas);
                double last_poll_ms = std::floor((now_ms - phase_ms) / period_ms) * period_ms + phase_ms;
                if (last_poll_ms > polled_at_ms[r]) {
                    policies[r]->polled(work_tokens, last_poll_ms / 1000.0);
                    polled_at_ms[r] = last_poll_ms;
                }
            }
        }
        SlotState& state = states[replica];
        for (size_t s = 0; s < o.slots; ++s) {
            auto& f = prefills[s];
            f.erase(std::remove_if(f.begin(), f.end(), [&](const Prefill& p) { return p.finish_ms <= now_ms; }),
                    f.end());
            double queued_ms = 0;
            size_t queued = 0;
            for (const Prefill& p : f)
                if (p.replica == replica) queued_ms += p.finish_ms - std::max(p.start_ms, now_ms), ++queued;
            state.queued_tokens[s] = queued_ms * tokens_per_ms;
            state.queued_requests[s] = queued;
        }
        size_t slot = policies[replica]->place(request, state);

        size_t hits = caches[slot].prefixHits(request.hash_ids);
        caches[slot].touch(request.hash_ids);
        bound_cached_blocks += double(bound_cache.prefixHits(request.hash_ids));
        bound_cache.touch(request.hash_ids);
        prompt_blocks += double(request.hash_ids.size());
        cached_blocks += double(hits);

        double uncached = std::max(0.0, request.input_tokens - double(hits) * block_tokens);
        double start_ms = std::max(now_ms, free_at_ms[slot]);
        free_at_ms[slot] = start_ms + uncached / tokens_per_ms;
        prefills[slot].push_back({replica, start_ms, free_at_ms[slot]});
        work_tokens[slot] += uncached;
        policies[replica]->computed(slot, uncached);
        state.done_tokens[slot] += uncached;
        ttft_ms.push_back(free_at_ms[slot] - now_ms);
        wait_ms_total += start_ms - now_ms;
        if (per_request.is_open())
            per_request << request.timestamp_ms << ',' << now_ms << ',' << slot << ',' << ttft_ms.back() << ','
                        << start_ms - now_ms << ',' << request.hash_ids.size() << ',' << hits << '\n';
    }

    std::vector<double> sorted = ttft_ms;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double t : ttft_ms) mean += t;
    mean /= double(std::max<size_t>(1, ttft_ms.size()));
    double p99 =
        sorted.empty() ? 0 : sorted[std::min(sorted.size() - 1, size_t(std::ceil(0.99 * double(sorted.size()))) - 1)];
    double work_total = 0, work_max = 0;
    for (double w : work_tokens) work_total += w, work_max = std::max(work_max, w);
    double work_mean = work_total / double(o.slots);

    auto round3 = [](double v) { return std::round(v * 1000) / 1000; };
    nlohmann::json out = {
        {"policy", o.policy},
        {"requests", trace.size()},
        {"slots", o.slots},
        {"cache_blocks", o.cache_blocks},
        {"speedup", o.speedup},
        {"shared_prefix_blocks", o.shared_prefix_blocks},
        {"hit_ratio", round3(prompt_blocks > 0 ? cached_blocks / prompt_blocks : 0)},
        {"bound_hit_ratio", round3(prompt_blocks > 0 ? bound_cached_blocks / prompt_blocks : 0)},
        {"ttft_mean_ms", round3(mean)},
        {"ttft_p99_ms", round3(p99)},
        {"wait_mean_ms", round3(wait_ms_total / double(std::max<size_t>(1, trace.size())))},
        {"work_imbalance", round3(work_mean > 0 ? work_max / work_mean : 0)},
    };
    out["replicas"] = o.replicas;
    nlohmann::json extra = policies.front()->extra();
    for (size_t r = 1; r < policies.size(); ++r) {
        const nlohmann::json more = policies[r]->extra();
        for (const auto& [name, value] : more.items())
            if (value.is_number_integer() && extra[name].is_number_integer())
                extra[name] = extra[name].get<int64_t>() + value.get<int64_t>();
            else if (value.is_number()) extra[name] = extra[name].get<double>() + value.get<double>();
    }
    out.update(extra);
    if (std::getenv("DPGATE_REPLAY_DEBUG")) out["work_tokens"] = work_tokens;
    return out;
}

int usage() {
    std::fprintf(
        stderr,
        "usage: dpgate-replay --trace FILE [--slots 16] [--cache-blocks N] [--policy P]\n"
        "                     [--speedup X | --time-scale X] [--prefill-tokens-per-s R] [--balance-factor F] "
        "[--slack-requests S] [--slack-tokens T]\n"
        "                     [--work-factor F] [--work-slack T] [--work-window-s W] [--work-poll-s P]\n"
        "                     [--replicas R] [--shared-prefix-blocks K] [--text-salt S] [--per-request FILE.csv]\n"
        "                     [--estimate 0|1]  (dpgate: 0 = every slot costs the whole prompt)\n"
        "policies: round-robin least-loaded first-block-hash cache-aware cache-aware-blocks dpgate\n");
    return 2;
}

}  // namespace
}  // namespace dpgate::replay

int main(int argc, char** argv) {
    using namespace dpgate::replay;
    Options o;
    try {
        for (int i = 1; i < argc; ++i) {
            std::string arg = argv[i];
            if (i + 1 >= argc) return usage();
            std::string value = argv[++i];
            if (arg == "--trace") o.trace_path = value;
            else if (arg == "--policy") o.policy = value;
            else if (arg == "--slots") o.slots = std::stoul(value);
            else if (arg == "--cache-blocks") o.cache_blocks = std::stoul(value);
            else if (arg == "--speedup" || arg == "--time-scale") o.speedup = std::stod(value);
            else if (arg == "--prefill-tokens-per-s") o.prefill_tokens_per_s = std::stod(value);
            else if (arg == "--balance-factor") o.chooser.balance_factor = std::stod(value);
            else if (arg == "--slack-requests") o.chooser.slack_requests = std::stod(value);
            else if (arg == "--shared-prefix-blocks") o.shared_prefix_blocks = std::stoul(value);
            else if (arg == "--slack-tokens") o.chooser.slack_tokens = std::stod(value);
            else if (arg == "--estimate") o.estimate = value != "0";
            else if (arg == "--text-salt") o.text_salt = value;
            else if (arg == "--work-factor") o.chooser.work_factor = std::stod(value);
            else if (arg == "--work-slack") o.chooser.work_slack_tokens = std::stod(value);
            else if (arg == "--work-window-s") o.work_window_s = std::stod(value);
            else if (arg == "--replicas") o.replicas = std::stoul(value);
            else if (arg == "--work-poll-s") o.work_poll_s = std::stod(value);
            else if (arg == "--per-request") o.per_request_path = value;
            else return usage();
        }
        if (o.trace_path.empty() || o.slots == 0 || o.speedup <= 0 || o.replicas == 0 || o.prefill_tokens_per_s <= 0)
            return usage();
        auto trace = readTrace(o.trace_path, o.shared_prefix_blocks);
        std::cout << run(o, trace).dump() << "\n";
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dpgate-replay: %s\n", e.what());
        return 1;
    }
    return 0;
}
