#include "http_session.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "json_escape.hpp"
#include "prompt_digest.hpp"
#include "prompt_hasher.hpp"
#include "rank_header.hpp"
#include "response_builder.hpp"

namespace dpgate::sim {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace net::experimental::awaitable_operators;
using Request = http::request<http::string_body>;
using Clock = std::chrono::steady_clock;

constexpr auto kNoThrow = net::as_tuple(net::use_awaitable);
// The gateway enforces body limits, not the backend: accept up to 1 GiB.
constexpr std::uint64_t kBodyLimitBytes = std::uint64_t{1} << 30;
constexpr std::uint32_t kHeaderLimitBytes = 1u << 20;
// Bytes a client may pipeline while we wait; more is simply not read ahead.
constexpr std::size_t kMaxReadAheadBytes = 1 << 20;
constexpr std::string_view kServerName = "dpgate-sim";
constexpr std::string_view kRankResponseHeader = "X-Sim-DP-Rank";
constexpr std::string_view kRankRequestHeader = "X-data-parallel-rank";

std::string_view errorTypeFor(int status) {
    switch (status) {
        case 400: return "BadRequestError";
        case 404: return "NotFoundError";
        case 429: return "RateLimitError";
        case 500: return "InternalServerError";
        case 503: return "ServiceUnavailableError";
        default: return status < 500 ? "BadRequestError" : "InternalServerError";
    }
}

enum class StreamOutcome { kDone, kClientGone, kCut };

struct StreamProgress {
    std::optional<std::uint64_t> cut_after_events;
    bool close_with_event = false;  // FaultConfig::close_with_event
    std::uint64_t events_written = 0;
    StreamOutcome outcome = StreamOutcome::kDone;
};

// What one completion request will produce.
struct AnswerPlan {
    ApiKind kind = ApiKind::kChat;
    int rank = 0;
    Usage usage;
    std::string finish_reason;
    std::optional<std::string> tool_call_name;
    std::uint64_t seed = 0;
    std::uint64_t prefill_tokens = 0;  // uncached: what the prefill costs
    std::chrono::microseconds prefill{0};
    std::chrono::microseconds per_token{0};
    bool include_usage = false;
};

// Counts a request in flight on its rank for as long as it is being served,
// including when the session is torn down at shutdown.
class InFlightGuard {
public:
    InFlightGuard(SimStats& stats, int rank) : stats_(stats), rank_(rank) {
        ++stats_.in_flight;
        if (rank_ >= 0) ++stats_.rank(rank_).running;
    }
    ~InFlightGuard() {
        --stats_.in_flight;
        if (rank_ >= 0) --stats_.rank(rank_).running;
    }
    InFlightGuard(const InFlightGuard&) = delete;
    InFlightGuard& operator=(const InFlightGuard&) = delete;

private:
    SimStats& stats_;
    int rank_;
};

class HttpSession {
public:
    HttpSession(SimContext& context, std::shared_ptr<Connection> connection)
        : context_(context), connection_(std::move(connection)) {}

    net::awaitable<void> run();

private:
    net::awaitable<bool> serve(Request& request);
    net::awaitable<bool> serveControl(Request& request, std::string_view path);
    net::awaitable<bool> serveCompletion(Request& request, ApiKind kind, const FaultConfig& fault);
    net::awaitable<StreamOutcome> streamAnswer(const Request& request, const AnswerPlan& plan, const FaultConfig& fault,
                                               std::uint64_t& generated);
    net::awaitable<bool> sendEvent(std::string event, StreamProgress& progress);
    net::awaitable<bool> writeResponse(const Request& request, http::status status, std::string body,
                                       std::string_view content_type, int rank = -1);
    net::awaitable<bool> writeError(const Request& request, int status, std::string_view message);
    net::awaitable<bool> prefill(const AnswerPlan& plan);
    net::awaitable<bool> waitInPrefillQueue(PrefillQueue& queue, std::uint64_t tokens);
    net::awaitable<bool> pauseWatchingClient(std::chrono::microseconds delay);
    net::awaitable<bool> waitWatchingClient(net::steady_timer& timer);
    net::awaitable<void> waitUntilClientGone();
    void closeSocket();
    void setCork(bool on);

    Socket& socket() { return connection_->socket; }

    SimContext& context_;
    std::shared_ptr<Connection> connection_;
    beast::flat_buffer buffer_;
};

net::awaitable<void> HttpSession::run() {
    for (;;) {
        connection_->idle = true;
        http::request_parser<http::string_body> parser;
        parser.body_limit(kBodyLimitBytes);
        parser.header_limit(kHeaderLimitBytes);
        auto [header_ec, header_bytes] = co_await http::async_read_header(socket(), buffer_, parser, kNoThrow);
        if (header_ec) break;
        connection_->idle = false;

        std::string_view target = parser.get().target();
        bool is_control = target.starts_with("/sim/");
        if (is_control) {
            connection_->control = true;
        } else if (context_.faults.get().mode == FaultMode::kRefuse) {
            break;  // close without a byte of answer, as a dead backend would
        }
        if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
            static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            auto [ec, n] = co_await net::async_write(socket(), net::buffer(kContinue), kNoThrow);
            if (ec) break;
        }
        auto [body_ec, body_bytes] = co_await http::async_read(socket(), buffer_, parser, kNoThrow);
        if (body_ec) break;
        Request request = parser.release();
        if (!co_await serve(request)) break;
    }
    closeSocket();
}

void HttpSession::setCork(bool on) {
    const int value = on ? 1 : 0;
    ::setsockopt(socket().native_handle(), IPPROTO_TCP, TCP_CORK, &value, sizeof value);
}

void HttpSession::closeSocket() {
    boost::system::error_code ignored;
    socket().shutdown(Socket::shutdown_both, ignored);
    socket().close(ignored);
}

net::awaitable<bool> HttpSession::serve(Request& request) {
    std::string_view target = request.target();
    std::string_view path = target.substr(0, target.find('?'));
    if (path.starts_with("/sim/")) co_return co_await serveControl(request, path);

    FaultConfig fault = context_.faults.get();
    bool is_chat = path == "/v1/chat/completions";
    bool is_completion = is_chat || path == "/v1/completions";
    if (fault.mode == FaultMode::kHang) {
        InFlightGuard guard(context_.stats, -1);
        if (is_completion) ++context_.stats.requests;
        co_await waitUntilClientGone();
        if (is_completion) ++context_.stats.cancelled;
        co_return false;
    }
    const auto method = request.method();
    if (is_completion) {
        if (method != http::verb::post) {
            co_return co_await writeResponse(request, http::status::method_not_allowed,
                                             R"({"detail":"Method Not Allowed"})", "application/json");
        }
        co_return co_await serveCompletion(request, is_chat ? ApiKind::kChat : ApiKind::kCompletion, fault);
    }
    if (path == "/health" && method == http::verb::get) {
        auto status = fault.mode == FaultMode::kUnhealthy ? http::status::service_unavailable : http::status::ok;
        co_return co_await writeResponse(request, status, "", "");
    }
    if (path.starts_with("/v1/") && fault.mode == FaultMode::kStatus) {
        co_return co_await writeError(request, fault.status,
                                      "Simulated fault: status " + std::to_string(fault.status) + ".");
    }
    if (path == "/v1/models" && method == http::verb::get) {
        const auto& options = context_.options;
        std::string model = jsonQuoted(options.model);
        std::string created = std::to_string(context_.started_unix_s);
        std::string body = R"({"object":"list","data":[{"id":)" + model + R"(,"object":"model","created":)" + created +
                           R"(,"owned_by":"vllm","root":)" + model + R"(,"parent":null,"max_model_len":)" +
                           std::to_string(options.window_tokens) + R"(,"permission":[]}]})";
        co_return co_await writeResponse(request, http::status::ok, std::move(body), "application/json");
    }
    if (path == "/version" && method == http::verb::get) {
        co_return co_await writeResponse(request, http::status::ok,
                                         R"({"version":)" + jsonQuoted(context_.options.version) + "}",
                                         "application/json");
    }
    if (path == "/metrics" && method == http::verb::get) {
        context_.refreshQueueStats();
        co_return co_await writeResponse(request, http::status::ok, context_.stats.metricsText(context_.options.model),
                                         "text/plain; version=0.0.4; charset=utf-8");
    }
    co_return co_await writeResponse(request, http::status::not_found, R"({"detail":"Not Found"})", "application/json");
}

net::awaitable<bool> HttpSession::serveControl(Request& request, std::string_view path) {
    const auto method = request.method();
    if (path == "/sim/fault" && method == http::verb::get) {
        co_return co_await writeResponse(request, http::status::ok, faultToJson(context_.faults.get()),
                                         "application/json");
    }
    if (path == "/sim/fault" && method == http::verb::post) {
        std::string error;
        auto fault = parseFaultJson(request.body(), context_.faults.get(), error);
        if (!fault) co_return co_await writeError(request, 400, error);
        context_.faults.set(*fault);
        if (fault->mode == FaultMode::kRefuse) context_.connections.closeIdleApiConnections();
        co_return co_await writeResponse(request, http::status::ok, faultToJson(*fault), "application/json");
    }
    if (path == "/sim/stats" && method == http::verb::get) {
        context_.refreshQueueStats();
        co_return co_await writeResponse(request, http::status::ok, context_.stats.statsJson(), "application/json");
    }
    if (path == "/sim/reset" && method == http::verb::post) {
        context_.reset();
        co_return co_await writeResponse(request, http::status::ok, "{}", "application/json");
    }
    co_return co_await writeResponse(request, http::status::not_found, R"({"detail":"Not Found"})", "application/json");
}

net::awaitable<bool> HttpSession::serveCompletion(Request& request, ApiKind kind, const FaultConfig& fault) {
    auto& stats = context_.stats;
    const auto& options = context_.options;
    {
        std::vector<std::pair<std::string, std::string>> headers;
        for (const auto& field : request) {
            headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
        }
        stats.recordRequest(request.method_string(), request.target(), std::move(headers), request.body());
    }
    ++stats.requests;
    if (fault.mode == FaultMode::kStatus) {
        co_return co_await writeError(request, fault.status,
                                      "Simulated fault: status " + std::to_string(fault.status) + ".");
    }

    PromptDigest digest;
    std::string error;
    if (!digestRequest(request.body(), kind, digest, error)) co_return co_await writeError(request, 400, error);
    // What the server counts: pseudo-tokens, or with --tokenizer the real count.
    std::uint64_t counted_tokens = digest.prompt_tokens;
    if (context_.real_counter) {
        auto real = kind == ApiKind::kChat ? context_.real_counter->count(request.body(), error)
                                           : context_.real_counter->countCompletion(request.body(), error);
        if (!real) co_return co_await writeError(request, 400, error);
        counted_tokens = *real;
    }

    int rank = 0;
    auto header = request.find(kRankRequestHeader);
    auto pinned = header == request.end() ? RankHeader{} : parseRankHeader(header->value(), options.dp_ranks);
    if (pinned.out_of_range) {
        co_return co_await writeError(
            request, 400,
            "data_parallel_rank " + pinned.text + " is out of range [0, " + std::to_string(options.dp_ranks) + ").");
    }
    if (pinned.rank) {
        rank = *pinned.rank;
    } else {
        rank = static_cast<int>(context_.round_robin++ % static_cast<std::uint64_t>(options.dp_ranks));
    }

    const std::uint64_t requested_output = digest.max_tokens.value_or(0);
    if (counted_tokens + requested_output > options.window_tokens) {
        co_return co_await writeError(
            request, 400,
            "This model's maximum context length is " + std::to_string(options.window_tokens) +
                " tokens. However, you requested " + std::to_string(counted_tokens + requested_output) + " tokens (" +
                std::to_string(counted_tokens) + " in the messages, " + std::to_string(requested_output) +
                " in the completion). Please reduce the length of the messages or completion.");
    }
    // The count this server reports (usage, /metrics): off by count_offset
    // when the test asks it to lie.
    const std::int64_t offset_tokens = static_cast<std::int64_t>(counted_tokens) + fault.count_offset;
    const std::uint64_t prompt_tokens = offset_tokens < 0 ? 0 : static_cast<std::uint64_t>(offset_tokens);

    InFlightGuard guard(stats, rank);
    auto& counters = stats.rank(rank);
    ++counters.served;
    auto& cache = *context_.caches[static_cast<std::size_t>(rank)];

    AnswerPlan plan;
    plan.kind = kind;
    plan.rank = rank;
    plan.seed = digest.text_seed;
    plan.include_usage = digest.include_usage;
    plan.usage.prompt_tokens = prompt_tokens;
    plan.usage.details = options.prompt_tokens_details;
    // vLLM always computes at least the last prompt token, so a full hit drops
    // the last block. The cache matches pseudo-token blocks of the canonical
    // text; a hit is capped below the counted prompt (the real one with
    // --tokenizer) and never exceeds the reported one.
    std::uint64_t cached_blocks = cache.matchBlocks(digest.block_hashes);
    std::uint64_t max_cacheable_blocks = counted_tokens == 0 ? 0 : (counted_tokens - 1) / PromptHasher::kBlockTokens;
    plan.usage.cached_tokens =
        std::min(std::min(cached_blocks, max_cacheable_blocks) * PromptHasher::kBlockTokens, prompt_tokens);
    if (kind == ApiKind::kChat && digest.tool_call_name) {
        plan.tool_call_name = digest.tool_call_name;
        plan.usage.completion_tokens = 2;  // the call's header chunk and its arguments chunk
        plan.finish_reason = "tool_calls";
    } else {
        plan.usage.completion_tokens =
            std::min(digest.max_tokens.value_or(options.max_output_tokens), options.max_output_tokens);
        plan.finish_reason = digest.max_tokens && *digest.max_tokens <= options.max_output_tokens ? "length" : "stop";
    }
    const std::uint64_t computed_tokens = counted_tokens - std::min(counted_tokens, plan.usage.cached_tokens);
    plan.prefill_tokens = computed_tokens;
    plan.prefill = std::chrono::microseconds(options.prefill_us_per_token * computed_tokens);
    plan.per_token = std::chrono::microseconds(options.decode_us_per_token);
    if (fault.mode == FaultMode::kSlow) plan.per_token += std::chrono::milliseconds(fault.chunk_delay_ms);
    counters.prompt_tokens += prompt_tokens;
    counters.cache_query_tokens += prompt_tokens;
    counters.cache_hit_tokens += plan.usage.cached_tokens;

    std::uint64_t generated = 0;
    bool keep_alive = false;
    bool client_gone = false;
    if (digest.stream) {
        auto outcome = co_await streamAnswer(request, plan, fault, generated);
        keep_alive = outcome == StreamOutcome::kDone && request.keep_alive();
        client_gone = outcome == StreamOutcome::kClientGone;
    } else {
        auto tokens = plan.usage.completion_tokens;
        auto decode = plan.per_token * static_cast<std::int64_t>(tokens > 0 ? tokens - 1 : 0);
        auto* queue = context_.prefillQueue(rank);
        bool answered =
            queue ? co_await waitInPrefillQueue(*queue, plan.prefill_tokens) && co_await pauseWatchingClient(decode)
                  : co_await pauseWatchingClient(plan.prefill + decode);
        if (answered) {
            generated = tokens;
            auto id = std::to_string(context_.next_request_id++);
            ResponseBuilder builder(kind, (kind == ApiKind::kChat ? "chatcmpl-sim" : "cmpl-sim") + id,
                                    context_.started_unix_s, options.model, false);
            std::string body;
            if (plan.tool_call_name) {
                body = builder.chatToolCall("call-sim" + id, *plan.tool_call_name, plan.usage);
            } else {
                std::string text;
                for (std::uint64_t i = 0; i < tokens; ++i) text += generatedPiece(plan.seed, i);
                body = kind == ApiKind::kChat ? builder.chatCompletion(text, plan.finish_reason, plan.usage)
                                              : builder.textCompletion(text, plan.finish_reason, plan.usage);
            }
            keep_alive = co_await writeResponse(request, http::status::ok, std::move(body), "application/json", rank);
        } else {
            client_gone = true;
        }
    }
    counters.generation_tokens += generated;
    cache.insert(digest.block_hashes);
    if (client_gone) ++stats.cancelled;
    co_return keep_alive;
}

net::awaitable<StreamOutcome> HttpSession::streamAnswer(const Request& request, const AnswerPlan& plan,
                                                        const FaultConfig& fault, std::uint64_t& generated) {
    http::response<http::empty_body> response{http::status::ok, request.version()};
    response.set(http::field::server, kServerName);
    response.set(http::field::content_type, "text/event-stream; charset=utf-8");
    response.set(http::field::cache_control, "no-cache");
    response.set(kRankResponseHeader, std::to_string(plan.rank));
    response.keep_alive(request.keep_alive());
    response.chunked(true);
    http::response_serializer<http::empty_body> serializer{response};
    // Like vLLM (Starlette's StreamingResponse) the headers leave before the
    // prefill is done.
    auto [header_ec, header_bytes] = co_await http::async_write_header(socket(), serializer, kNoThrow);
    if (header_ec) co_return StreamOutcome::kClientGone;
    if (!co_await prefill(plan)) co_return StreamOutcome::kClientGone;

    StreamProgress progress;
    if (fault.mode == FaultMode::kCutStream) {
        progress.cut_after_events = fault.after_chunks;
        progress.close_with_event = fault.close_with_event;
    }
    auto id = std::to_string(context_.next_request_id++);
    ResponseBuilder builder(plan.kind, (plan.kind == ApiKind::kChat ? "chatcmpl-sim" : "cmpl-sim") + id,
                            context_.started_unix_s, context_.options.model, true);
    const std::uint64_t tokens = plan.usage.completion_tokens;
    auto stopped = [&] { return progress.outcome; };

    if (plan.kind == ApiKind::kChat && !co_await sendEvent(builder.chatRoleEvent(), progress)) co_return stopped();
    if (plan.tool_call_name) {
        if (!co_await sendEvent(builder.chatToolCallStartEvent("call-sim" + id, *plan.tool_call_name), progress))
            co_return stopped();
        generated = 1;
        if (!co_await pauseWatchingClient(plan.per_token)) co_return StreamOutcome::kClientGone;
        if (!co_await sendEvent(builder.chatToolCallArgumentsEvent("{}"), progress)) co_return stopped();
        generated = 2;
    } else {
        for (std::uint64_t i = 0; i < tokens; ++i) {
            if (i > 0 && !co_await pauseWatchingClient(plan.per_token)) co_return StreamOutcome::kClientGone;
            std::string_view finish = i + 1 == tokens ? std::string_view(plan.finish_reason) : std::string_view();
            auto piece = generatedPiece(plan.seed, i);
            auto event = plan.kind == ApiKind::kChat ? builder.chatContentEvent(piece, finish)
                                                     : builder.textEvent(piece, finish);
            if (!co_await sendEvent(std::move(event), progress)) co_return stopped();
            generated = i + 1;
        }
    }
    if (plan.include_usage && !co_await sendEvent(builder.usageEvent(plan.usage), progress)) co_return stopped();
    if (!co_await sendEvent(std::string(ResponseBuilder::kDoneEvent), progress)) co_return stopped();
    if (progress.cut_after_events) {
        // Fewer events than the cut point: still end without the last chunk.
        closeSocket();
        co_return StreamOutcome::kCut;
    }
    auto [ec, n] = co_await net::async_write(socket(), http::make_chunk_last(), kNoThrow);
    co_return ec ? StreamOutcome::kClientGone : StreamOutcome::kDone;
}

net::awaitable<bool> HttpSession::sendEvent(std::string event, StreamProgress& progress) {
    if (progress.cut_after_events && progress.events_written >= *progress.cut_after_events) {
        closeSocket();
        progress.outcome = StreamOutcome::kCut;
        co_return false;
    }
    const bool last_before_cut = progress.cut_after_events && progress.close_with_event &&
                                 progress.events_written + 1 == *progress.cut_after_events;
    // Corked, the event's bytes wait in the socket; the shutdown then sends
    // them with the FIN in one segment.
    if (last_before_cut) setCork(true);
    // One write per event, so each reaches the client as its own chunk.
    auto [ec, n] = co_await net::async_write(socket(), http::make_chunk(net::buffer(event)), kNoThrow);
    if (ec) {
        progress.outcome = StreamOutcome::kClientGone;
        co_return false;
    }
    ++progress.events_written;
    if (last_before_cut) {
        closeSocket();
        progress.outcome = StreamOutcome::kCut;
        co_return false;
    }
    co_return true;
}

net::awaitable<bool> HttpSession::writeResponse(const Request& request, http::status status, std::string body,
                                                std::string_view content_type, int rank) {
    http::response<http::string_body> response{status, request.version()};
    response.set(http::field::server, kServerName);
    if (!content_type.empty()) response.set(http::field::content_type, content_type);
    if (rank >= 0) response.set(kRankResponseHeader, std::to_string(rank));
    response.keep_alive(request.keep_alive());
    response.body() = std::move(body);
    response.prepare_payload();
    auto [ec, n] = co_await http::async_write(socket(), response, kNoThrow);
    co_return !ec && response.keep_alive();
}

net::awaitable<bool> HttpSession::writeError(const Request& request, int status, std::string_view message) {
    co_return co_await writeResponse(request, static_cast<http::status>(status),
                                     errorJson(message, errorTypeFor(status), status), "application/json");
}

net::awaitable<bool> HttpSession::prefill(const AnswerPlan& plan) {
    auto* queue = context_.prefillQueue(plan.rank);
    if (!queue) co_return co_await pauseWatchingClient(plan.prefill);
    co_return co_await waitInPrefillQueue(*queue, plan.prefill_tokens);
}

// Waits for the rank's prefill queue to get through this request's tokens.
// Returns false when the client went away; either way the request leaves the
// queue, also when the session is destroyed at shutdown, so the ones behind
// it move up (vLLM aborts a request whose client disconnects).
net::awaitable<bool> HttpSession::waitInPrefillQueue(PrefillQueue& queue, std::uint64_t tokens) {
    auto timer = std::make_shared<net::steady_timer>(socket().get_executor());
    // Someone ahead left: the timer is made due at once, on this session's
    // strand, so the wait ends now or, if it has not begun yet, as it begins.
    auto wake = [executor = socket().get_executor(), weak = std::weak_ptr(timer)] {
        net::post(executor, [weak] {
            if (auto due = weak.lock()) due->expires_at(Clock::time_point::min());
        });
    };
    struct Leave {
        PrefillQueue& queue;
        std::uint64_t id;
        ~Leave() { queue.remove(id, Clock::now()); }
    } leave{queue, queue.add(tokens, Clock::now(), std::move(wake))};
    while (auto done_at = queue.doneAt(leave.id, Clock::now())) {
        timer->expires_at(*done_at);
        if (!co_await waitWatchingClient(*timer)) co_return false;
    }
    co_return true;
}

// Sleeps `delay` while watching the socket, the way vLLM notices a client
// disconnect mid-generation. Returns false when the client went away. Bytes
// that arrive meanwhile are a pipelined next request and are kept.
net::awaitable<bool> HttpSession::pauseWatchingClient(std::chrono::microseconds delay) {
    if (delay.count() <= 0) co_return true;
    const auto deadline = Clock::now() + delay;
    net::steady_timer timer(socket().get_executor());
    while (Clock::now() < deadline) {
        timer.expires_at(deadline);
        if (buffer_.size() >= kMaxReadAheadBytes) {
            co_await timer.async_wait(kNoThrow);
            co_return true;
        }
        auto result =
            co_await (timer.async_wait(kNoThrow) || socket().async_read_some(buffer_.prepare(4096), kNoThrow));
        if (result.index() == 0) co_return true;
        auto [ec, n] = std::get<1>(result);
        if (ec) co_return false;
        buffer_.commit(n);
    }
    co_return true;
}

// One wait for `timer` (due, or made due early) while watching the socket.
// Returns false when the client went away; true when the timer ended the wait
// or a pipelined byte arrived: the caller looks again.
net::awaitable<bool> HttpSession::waitWatchingClient(net::steady_timer& timer) {
    if (buffer_.size() >= kMaxReadAheadBytes) {
        co_await timer.async_wait(kNoThrow);
        co_return true;
    }
    auto result = co_await (timer.async_wait(kNoThrow) || socket().async_read_some(buffer_.prepare(4096), kNoThrow));
    if (result.index() == 0) co_return true;
    auto [ec, n] = std::get<1>(result);
    if (ec) co_return false;
    buffer_.commit(n);
    co_return true;
}

net::awaitable<void> HttpSession::waitUntilClientGone() {
    for (;;) {
        auto [ec, n] = co_await socket().async_read_some(buffer_.prepare(4096), kNoThrow);
        if (ec) co_return;
        buffer_.commit(n);
        if (buffer_.size() >= kMaxReadAheadBytes) buffer_.consume(buffer_.size());
    }
}

net::awaitable<void> runHttpSession(SimContext& context, std::shared_ptr<Connection> connection) {
    auto id = context.connections.add(connection);
    struct Unregister {
        SimContext& context;
        std::uint64_t id;
        ~Unregister() { context.connections.remove(id); }
    } unregister{context, id};
    HttpSession session(context, std::move(connection));
    co_await session.run();
}

}  // namespace

void startHttpSession(SimContext& context, Socket socket) {
    auto connection = std::make_shared<Connection>(std::move(socket));
    auto executor = connection->socket.get_executor();
    net::co_spawn(executor, runHttpSession(context, std::move(connection)), net::detached);
}

}  // namespace dpgate::sim
