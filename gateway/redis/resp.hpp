// RESP, Redis's wire protocol, both ways. Replies are parsed by hiredis's
// reader (only its parser: the bytes travel through Asio in
// redis_client.cpp, since hiredis 0.14 has no TLS), building Reply trees
// with bounds of its own on nesting and size. Pure (no sockets), so the fuzz
// build links it (tests/fuzz/redis/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct redisReader;  // hiredis/read.h

namespace dpgate::gateway::redis {

struct Reply {
    enum class Kind { nil, integer, string, status, error, array };
    Kind kind = Kind::nil;
    int64_t integer = 0;
    std::string str;  // string, status, error
    std::vector<Reply> elements;

    bool isError() const { return kind == Kind::error; }
};

// What one reply may hold. A budget script answers a few integers; these
// bounds only keep a broken or hostile server from taking the process's
// memory (hiredis's own limit is 7 levels; a Lua script's table nests less).
struct ReaderLimits {
    size_t max_depth = 5;                // arrays inside arrays, the outermost counting 1
    size_t max_reply_bytes = 64u << 20;  // a reply's strings plus 64 bytes per element
};

// Replies read from a byte stream cut anywhere: feed() what arrived, then
// next() until it gives nothing. Once broken (a protocol error, a bound
// passed) it stays broken: the connection must be closed, since nothing
// after a bad byte can be matched to its command.
class ReplyReader {
public:
    explicit ReplyReader(ReaderLimits limits = {});
    ~ReplyReader();
    ReplyReader(const ReplyReader&) = delete;
    ReplyReader& operator=(const ReplyReader&) = delete;

    void feed(std::string_view bytes);
    // The next whole reply; nullopt when more bytes are needed, or broken.
    std::optional<Reply> next();
    bool broken() const { return !error_.empty(); }
    const std::string& error() const { return error_; }

    struct Building;  // what hiredis's callbacks see (resp.cpp)

private:
    void fail(std::string error);

    ReaderLimits limits_;
    std::unique_ptr<Building> building_;
    redisReader* reader_ = nullptr;
    std::string error_;
};

// One command as RESP: an array of bulk strings, binary-safe.
std::string formatCommand(const std::vector<std::string>& argv);
// The same, appended to `out` (a batch of pipelined commands).
void appendCommand(std::string& out, const std::vector<std::string>& argv);

// "ERR wrong number...", "(nil)", "42", "[1, \"a\"]": for logs and errors.
std::string describe(const Reply& reply);

}  // namespace dpgate::gateway::redis
