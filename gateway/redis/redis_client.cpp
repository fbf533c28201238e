#include "gateway/redis/redis_client.hpp"

#include "gateway/net/tls_context.hpp"

#include "gateway/platform/log.hpp"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <deque>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>

namespace dpgate::gateway::redis {

namespace ssl = boost::asio::ssl;
using Clock = std::chrono::steady_clock;

namespace {

// Pauses between connection attempts: the first soon (a restart, a
// dropped connection), then doubling, never longer than a PING's interval.
constexpr uint64_t kRetryFirstMs = 100;
constexpr uint64_t kRetryMaxMs = 1000;
constexpr uint64_t kPingIntervalMs = 1000;
// Commands queued and unanswered: beyond it Redis is far behind the
// traffic, and a new command fails at once rather than add to the memory
// the backlog holds (a budget command is ~200 bytes, its waiter ~100).
constexpr uint64_t kMaxQueued = 100'000;
constexpr size_t kReadChunk = 64 * 1024;

struct Address {
    std::string host;
    std::string port;
};

// "host:port", "[v6]:port" (conf/ checked the shape).
Address splitAddress(const std::string& address) {
    const size_t colon = address.rfind(':');
    Address out{address.substr(0, colon), colon == std::string::npos ? "6379" : address.substr(colon + 1)};
    if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']')
        out.host = out.host.substr(1, out.host.size() - 2);
    return out;
}

bool isIpAddress(const std::string& host) {
    boost::system::error_code ec;
    net::ip::make_address(host, ec);
    return !ec;
}

std::string readPassword(const std::string& file) {
    if (file.empty()) return {};
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("limits.redis.password_file: " + file + ": cannot be read");
    std::string password;
    std::getline(in, password);
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) password.pop_back();
    return password;
}

std::shared_ptr<ssl::context> clientTlsContext(const conf::RedisConfig& config) {
    if (!config.tls) return nullptr;
    return makeClientTlsContext("limits.redis", config.ca_file, config.cert_file, config.key_file);
}

std::string sha1Hex(std::string_view text) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr) != 1)
        throw std::runtime_error("redis: SHA-1 unavailable in OpenSSL");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < size; ++i) {
        hex += kHex[digest[i] >> 4];
        hex += kHex[digest[i] & 15];
    }
    return hex;
}

Result failure(std::string error) {
    Result result;
    result.error = std::move(error);
    return result;
}

Result answer(Reply&& reply) {
    Result result;
    result.ok = true;
    result.reply = std::move(reply);
    return result;
}

bool noScript(const Result& result) {
    return result.ok && result.reply.isError() && result.reply.str.starts_with("NOSCRIPT");
}

std::string helloWire(const conf::RedisConfig& config, const std::string& password) {
    std::string wire;
    if (!config.password_file.empty()) {
        std::vector<std::string> auth{"AUTH"};
        if (!config.username.empty()) auth.push_back(config.username);
        auth.push_back(password);
        appendCommand(wire, auth);
    }
    appendCommand(wire, {"PING"});
    return wire;
}

}  // namespace

Script::Script(std::string source) {
    std::string sha1 = sha1Hex(source);
    body_ = std::make_shared<const Body>(Body{std::move(source), std::move(sha1)});
}

namespace {

// A command written (or about to be) and not yet answered.
struct Waiting {
    RedisClient::Completion done;
    Clock::time_point deadline;
};

// One connection to Redis, plain or TLS.
struct Connection {
    explicit Connection(net::io_context& io) : resolver(io), socket(io), connect_limit(io), deadline(io) {}

    tcp::resolver resolver;
    tcp::socket socket;
    std::unique_ptr<ssl::stream<tcp::socket&>> tls;
    net::steady_timer connect_limit;  // the connect, TLS, AUTH and PING together
    net::steady_timer deadline;       // the oldest waiting command's
    ReplyReader reader;
    std::vector<char> read_buffer = std::vector<char>(kReadChunk);

    bool ready = false;           // AUTH and PING answered: commands go on it
    bool open = true;             // false once closed: nothing more is read or written
    bool timed_out = false;       // closed by connect_limit
    bool writing = false;         // a writer coroutine runs
    std::deque<Waiting> waiting;  // in the order their bytes went out: replies come in it
    std::string out;              // bytes to write next
    std::string sending;          // bytes being written

    // `op(stream)` on whichever stream carries the bytes.
    template <class Op>
    auto with(Op op) {
        return tls ? op(*tls) : op(socket);
    }
    void close() {
        open = false;
        boost::system::error_code ignored;
        resolver.cancel();
        socket.close(ignored);
        connect_limit.cancel();
        deadline.cancel();
    }
};

}  // namespace

// What the client's thread keeps; nothing here is touched from another thread.
struct RedisClient::Loop {
    explicit Loop(RedisClient& client)
        : client(client),
          io(client.io_),
          address(splitAddress(client.config_.address)),
          hello(helloWire(client.config_, client.password_)),
          ping_wire(formatCommand({"PING"})),
          retry_timer(io),
          ping_timer(io) {}

    RedisClient& client;
    net::io_context& io;
    const Address address;
    const std::string hello;      // AUTH (when a password is set) and PING
    const std::string ping_wire;  // PING
    net::steady_timer retry_timer;
    net::steady_timer ping_timer;

    std::shared_ptr<Connection> connection;  // ready, or null
    std::shared_ptr<Connection> connecting;  // an attempt under way
    bool stopped = false;
    bool ping_waiting = false;
    enum class Logged { nothing, up, down } logged = Logged::nothing;
    bool connected_once = false;
    std::string down_reason = "not connected yet";
    std::shared_ptr<std::promise<void>> first_attempt = std::make_shared<std::promise<void>>();

    awaitable<void> run();
    awaitable<std::shared_ptr<Connection>> connect(std::string& error);
    awaitable<std::optional<Reply>> readOne(Connection& c, std::string& error);
    awaitable<void> readLoop(std::shared_ptr<Connection> c);
    awaitable<void> writeLoop(std::shared_ptr<Connection> c);
    awaitable<void> watchDeadlines(std::shared_ptr<Connection> c);
    awaitable<void> pingLoop();

    void limitConnect(const std::shared_ptr<Connection>& c);
    void startTls(Connection& c);
    std::string checkHello(const Reply& reply, bool auth) const;
    std::string attemptError(const Connection& c, const std::string& what) const;
    void up(const std::shared_ptr<Connection>& c);
    void markDown(const std::string& reason);
    void drop(Connection& c, const std::string& why);
    bool deliver(Connection& c, size_t bytes);
    void enqueue(std::string wire, Clock::time_point deadline, Completion done);
    void enqueueHere(std::string wire, Completion done);
    void ping();
    void finish(Completion& done, Result result);
    void shutdown();
    std::string name() const { return "redis " + client.config_.address; }
};

RedisClient::RedisClient(const conf::RedisConfig& config)
    : config_(config),
      password_(readPassword(config.password_file)),
      tls_(clientTlsContext(config)),
      loop_(std::make_unique<Loop>(*this)) {}

RedisClient::~RedisClient() { stop(); }

std::string RedisClient::lastError() const {
    std::lock_guard lock(error_mutex_);
    return last_error_;
}

void RedisClient::start() {
    if (thread_.joinable() || io_.stopped()) return;  // once only
    {
        std::lock_guard lock(submit_mutex_);
        accepting_ = true;
    }
    std::future<void> first = loop_->first_attempt->get_future();
    net::co_spawn(io_, loop_->run(), net::detached);
    net::co_spawn(io_, loop_->pingLoop(), net::detached);
    thread_ = std::thread([this] {
        try {
            io_.run();
        } catch (const std::exception& e) {
            logLine(LogLevel::error, "redis: the client's thread ended: " + std::string(e.what()));
        }
    });
    first.wait_for(ms(config_.connect_timeout_ms + 500));
}

void RedisClient::stop() {
    {
        std::lock_guard lock(submit_mutex_);
        if (!accepting_) return;
        accepting_ = false;
    }
    // Every command was posted before this (the mutex): each is queued and
    // failed by shutdown(), none is left unanswered.
    net::post(io_, [this] {
        loop_->shutdown();
        io_.stop();
    });
    thread_.join();
}

void RedisClient::submit(std::string wire, Completion done) {
    const Clock::time_point deadline = Clock::now() + ms(config_.timeout_ms);
    std::unique_lock lock(submit_mutex_);
    if (!accepting_) {
        lock.unlock();
        done(failure("redis client not running"));
        return;
    }
    if (queued_.fetch_add(1, std::memory_order_relaxed) >= kMaxQueued) {
        queued_.fetch_sub(1, std::memory_order_relaxed);
        lock.unlock();
        done(failure("redis: " + std::to_string(kMaxQueued) + " commands already waiting"));
        return;
    }
    net::post(io_, [this, wire = std::move(wire), deadline, done = std::move(done)]() mutable {
        loop_->enqueue(std::move(wire), deadline, std::move(done));
    });
}

std::string RedisClient::evalWire(const Script& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) {
    std::vector<std::string> argv;
    argv.reserve(3 + keys.size() + args.size());
    argv.push_back("EVALSHA");
    argv.push_back(script.sha1());
    argv.push_back(std::to_string(keys.size()));
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return formatCommand(argv);
}

void RedisClient::submitEval(Script script, std::string wire, Completion done) {
    std::string again = wire;
    auto evaluated = [this, script = std::move(script), again = std::move(again),
                      done = std::move(done)](Result result) mutable {
        if (!noScript(result)) return done(std::move(result));
        // Redis lost the script (restarted, SCRIPT FLUSH): load it, then
        // the same EVALSHA once more.
        auto loaded = [this, again = std::move(again), done = std::move(done)](Result load) mutable {
            if (!load.ok || load.reply.isError()) return done(std::move(load));
            loop_->enqueueHere(std::move(again), std::move(done));
        };
        loop_->enqueueHere(formatCommand({"SCRIPT", "LOAD", script.source()}), Completion(std::move(loaded)));
    };
    submit(std::move(wire), Completion(std::move(evaluated)));
}

void RedisClient::evalThen(const Script& script, std::vector<std::string> keys, std::vector<std::string> args,
                           std::function<void(Result)> done) {
    submitEval(script, evalWire(script, keys, args), Completion(std::move(done)));
}

void RedisClient::Loop::finish(Completion& done, Result result) {
    client.queued_.fetch_sub(1, std::memory_order_relaxed);
    try {
        done(std::move(result));
    } catch (const std::exception& e) {
        logLine(LogLevel::error, "redis: a command's completion threw: " + std::string(e.what()));
    }
}

void RedisClient::Loop::enqueue(std::string wire, Clock::time_point deadline, Completion done) {
    if (stopped) return finish(done, failure("redis client stopped"));
    if (!connection) return finish(done, failure("redis unreachable: " + down_reason));
    Connection& c = *connection;
    if (c.waiting.empty()) c.deadline.cancel();  // watchDeadlines waits for this one now
    c.out += wire;
    c.waiting.push_back(Waiting{std::move(done), deadline});
    if (!c.writing) {
        c.writing = true;
        // Spawned, so it starts after the commands already posted are queued:
        // they go out in one write.
        net::co_spawn(io, writeLoop(connection), net::detached);
    }
}

void RedisClient::Loop::enqueueHere(std::string wire, Completion done) {
    client.queued_.fetch_add(1, std::memory_order_relaxed);
    enqueue(std::move(wire), Clock::now() + ms(client.config_.timeout_ms), std::move(done));
}

void RedisClient::Loop::ping() {
    if (!connection || ping_waiting) return;
    ping_waiting = true;
    enqueueHere(ping_wire, Completion([this](Result) { ping_waiting = false; }));
}

void RedisClient::Loop::markDown(const std::string& reason) {
    down_reason = reason;
    client.reachable_.store(false, std::memory_order_relaxed);
    {
        std::lock_guard lock(client.error_mutex_);
        client.last_error_ = reason;
    }
    if (logged != Logged::down && !stopped)
        logLine(LogLevel::error, name() + " unreachable (" + reason + "): its commands fail at once until it answers");
    logged = Logged::down;
}

void RedisClient::Loop::up(const std::shared_ptr<Connection>& c) {
    connection = c;
    if (connected_once) client.reconnects_.fetch_add(1, std::memory_order_relaxed);
    connected_once = true;
    client.reachable_.store(true, std::memory_order_relaxed);
    if (logged != Logged::up)
        logLine(LogLevel::info,
                name() + (logged == Logged::down ? " reachable again" : " connected") + (client.tls_ ? " (TLS)" : ""));
    logged = Logged::up;
    net::co_spawn(io, watchDeadlines(c), net::detached);
}

void RedisClient::Loop::drop(Connection& c, const std::string& why) {
    if (!c.open) return;
    c.close();
    if (connection.get() == &c) connection.reset();
    markDown(why);
    std::deque<Waiting> waiting = std::move(c.waiting);
    c.waiting.clear();
    c.out.clear();
    // A completion may queue another command (an EVALSHA after NOSCRIPT):
    // with no connection it fails at once.
    for (Waiting& w : waiting) finish(w.done, failure("redis: " + why));
}

void RedisClient::Loop::shutdown() {
    stopped = true;
    retry_timer.cancel();
    ping_timer.cancel();
    if (connecting) connecting->close();
    if (connection) drop(*connection, "client stopped");
}

// The bytes just read: every reply they complete goes to its command.
bool RedisClient::Loop::deliver(Connection& c, size_t bytes) {
    c.reader.feed(std::string_view(c.read_buffer.data(), bytes));
    while (std::optional<Reply> reply = c.reader.next()) {
        if (c.waiting.empty()) {
            drop(c, "a reply to no command: " + describe(*reply));
            return false;
        }
        Waiting w = std::move(c.waiting.front());
        c.waiting.pop_front();
        client.reachable_.store(true, std::memory_order_relaxed);
        finish(w.done, answer(std::move(*reply)));
        if (!c.open) return false;
    }
    if (c.reader.broken()) {
        drop(c, "protocol error: " + c.reader.error());
        return false;
    }
    return true;
}

awaitable<void> RedisClient::Loop::readLoop(std::shared_ptr<Connection> c) {
    while (c->open) {
        auto [ec, n] = co_await c->with(
            [&](auto& stream) { return stream.async_read_some(net::buffer(c->read_buffer), use_nothrow); });
        if (ec) {
            drop(*c, "connection lost: " + ec.message());
            break;
        }
        if (!deliver(*c, n)) break;
    }
}

awaitable<void> RedisClient::Loop::writeLoop(std::shared_ptr<Connection> c) {
    while (c->open && !c->out.empty()) {
        c->sending.swap(c->out);
        auto [ec, n] = co_await c->with(
            [&](auto& stream) { return net::async_write(stream, net::buffer(c->sending), use_nothrow); });
        c->sending.clear();
        if (ec) drop(*c, "write: " + ec.message());
    }
    c->writing = false;
}

// Replies come in order: once the oldest command is past its deadline, every
// later reply would be matched after it, so the connection goes.
awaitable<void> RedisClient::Loop::watchDeadlines(std::shared_ptr<Connection> c) {
    const std::string why = "no answer within " + std::to_string(client.config_.timeout_ms) + " ms";
    while (c->open) {
        c->deadline.expires_at(c->waiting.empty() ? Clock::now() + std::chrono::hours(1) : c->waiting.front().deadline);
        co_await c->deadline.async_wait(use_nothrow);
        if (c->open && !c->waiting.empty() && c->waiting.front().deadline <= Clock::now()) drop(*c, why);
    }
}

awaitable<void> RedisClient::Loop::pingLoop() {
    while (!stopped) {
        ping_timer.expires_after(ms(kPingIntervalMs));
        co_await ping_timer.async_wait(use_nothrow);
        if (!stopped) ping();
    }
}

awaitable<void> RedisClient::Loop::run() {
    uint64_t backoff = kRetryFirstMs;
    while (!stopped) {
        std::string error;
        std::shared_ptr<Connection> c = co_await connect(error);
        connecting.reset();
        if (stopped) break;
        if (c) up(c);
        else markDown(error);
        if (first_attempt) {  // start() waits for this
            first_attempt->set_value();
            first_attempt.reset();
        }
        if (c) {
            backoff = kRetryFirstMs;
            co_await readLoop(c);
        }
        retry_timer.expires_after(ms(c ? kRetryFirstMs : backoff));
        co_await retry_timer.async_wait(use_nothrow);
        if (!c) backoff = std::min(backoff * 2, kRetryMaxMs);
    }
}

// connect_timeout_ms bounds the whole attempt: resolve, connect, TLS, AUTH, PING.
void RedisClient::Loop::limitConnect(const std::shared_ptr<Connection>& c) {
    c->connect_limit.expires_after(ms(client.config_.connect_timeout_ms));
    c->connect_limit.async_wait([weak = std::weak_ptr<Connection>(c)](boost::system::error_code ec) {
        std::shared_ptr<Connection> c = weak.lock();
        if (ec || !c || c->ready) return;
        c->timed_out = true;
        c->close();
    });
}

void RedisClient::Loop::startTls(Connection& c) {
    c.tls = std::make_unique<ssl::stream<tcp::socket&>>(c.socket, *client.tls_);
    // SNI carries names only (RFC 6066); an address is checked against the
    // certificate's IP entries.
    if (!isIpAddress(address.host)) SSL_set_tlsext_host_name(c.tls->native_handle(), address.host.c_str());
    c.tls->set_verify_callback(ssl::host_name_verification(address.host));
}

// "" when the reply is what AUTH or PING should answer, else why not.
std::string RedisClient::Loop::checkHello(const Reply& reply, bool auth) const {
    if (auth) return reply.isError() ? "AUTH refused: " + describe(reply) : "";
    if (reply.kind == Reply::Kind::status && reply.str == "PONG") return "";
    std::string why = "PING answered " + describe(reply);
    if (reply.isError() && reply.str.starts_with("NOAUTH") && client.config_.password_file.empty())
        why += " (AUTH needs limits.redis.password_file)";
    return why;
}

// Why an attempt failed: what the step met, or that connect_timeout_ms ran out
// (the step then only met the closed socket).
std::string RedisClient::Loop::attemptError(const Connection& c, const std::string& what) const {
    if (c.timed_out)
        return client.config_.address + ": no answer within " + std::to_string(client.config_.connect_timeout_ms) +
               " ms (connect_timeout_ms)";
    return client.config_.address + ": " + what;
}

awaitable<std::optional<Reply>> RedisClient::Loop::readOne(Connection& c, std::string& error) {
    for (;;) {
        if (std::optional<Reply> reply = c.reader.next()) co_return reply;
        if (c.reader.broken()) {
            error = "protocol error: " + c.reader.error();
            co_return std::nullopt;
        }
        auto [ec, n] = co_await c.with(
            [&](auto& stream) { return stream.async_read_some(net::buffer(c.read_buffer), use_nothrow); });
        if (ec) {
            error = "reading: " + ec.message();
            co_return std::nullopt;
        }
        c.reader.feed(std::string_view(c.read_buffer.data(), n));
    }
}

awaitable<std::shared_ptr<Connection>> RedisClient::Loop::connect(std::string& error) {
    auto c = std::make_shared<Connection>(io);
    connecting = c;
    limitConnect(c);
    auto [rec, found] = co_await c->resolver.async_resolve(address.host, address.port, use_nothrow);
    if (rec) {
        error = attemptError(*c, "cannot resolve: " + rec.message());
        co_return nullptr;
    }
    auto [cec, at] = co_await net::async_connect(c->socket, found, use_nothrow);
    if (cec) {
        error = attemptError(*c, "connect: " + cec.message());
        co_return nullptr;
    }
    c->socket.set_option(tcp::no_delay(true));
    if (client.tls_) {
        startTls(*c);
        auto [hec] = co_await c->tls->async_handshake(ssl::stream_base::client, use_nothrow);
        if (hec) {
            error = attemptError(*c, "TLS handshake: " + hec.message());
            co_return nullptr;
        }
    }
    c->sending = hello;
    auto [wec, written] =
        co_await c->with([&](auto& stream) { return net::async_write(stream, net::buffer(c->sending), use_nothrow); });
    c->sending.clear();
    if (wec) {
        error = attemptError(*c, "write: " + wec.message());
        co_return nullptr;
    }
    const bool auth = !client.config_.password_file.empty();
    for (int i = 0; i < (auth ? 2 : 1); ++i) {
        std::string read_error;
        std::optional<Reply> reply = co_await readOne(*c, read_error);
        if (!reply) {
            error = attemptError(*c, read_error);
            co_return nullptr;
        }
        if (std::string wrong = checkHello(*reply, auth && i == 0); !wrong.empty()) {
            error = attemptError(*c, wrong);
            co_return nullptr;
        }
    }
    c->ready = true;
    c->connect_limit.cancel();
    co_return c;
}

}  // namespace dpgate::gateway::redis
