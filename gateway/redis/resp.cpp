#include "gateway/redis/resp.hpp"

#include <hiredis/read.h>

#include <algorithm>
#include <charconv>
#include <new>
#include <stdexcept>

namespace dpgate::gateway::redis {

// What hiredis's object callbacks build into: each reply's tree, its cost so
// far, and why the callbacks refused (hiredis itself only says "Out of
// memory" when a callback returns null).
struct ReplyReader::Building {
    ReaderLimits limits;
    size_t bytes = 0;  // of the reply being read
    std::string error;
};

namespace {

// Each element's share of max_reply_bytes: about a Reply's own size.
constexpr size_t kElementCost = 64;
// Elements reserved ahead of the array's announced length: the length is the
// peer's word, the elements arrive one by one.
constexpr int kReserveAtMost = 16;

ReplyReader::Building& building(const redisReadTask* task) {
    return *static_cast<ReplyReader::Building*>(task->privdata);
}

// Puts `reply` where the task says: a new root, or the next element of its
// parent array (hiredis reads depth first, so the parent is never moved
// while its elements are added).
void* place(const redisReadTask* task, Reply&& reply) {
    ReplyReader::Building& b = building(task);
    const size_t cost = kElementCost + reply.str.size();
    if (b.bytes + cost > b.limits.max_reply_bytes) {
        b.error = "a reply larger than " + std::to_string(b.limits.max_reply_bytes) + " bytes";
        return nullptr;
    }
    b.bytes += cost;
    if (task->parent == nullptr) return new (std::nothrow) Reply(std::move(reply));
    auto* parent = static_cast<Reply*>(task->parent->obj);
    if (task->idx < 0 || size_t(task->idx) != parent->elements.size()) {
        b.error = "an array element out of order";
        return nullptr;
    }
    parent->elements.push_back(std::move(reply));
    return &parent->elements.back();
}

void* createString(const redisReadTask* task, char* text, size_t length) {
    Reply reply;
    switch (task->type) {
        case REDIS_REPLY_STATUS: reply.kind = Reply::Kind::status; break;
        case REDIS_REPLY_ERROR: reply.kind = Reply::Kind::error; break;
        default: reply.kind = Reply::Kind::string; break;
    }
    if (length > building(task).limits.max_reply_bytes) {
        building(task).error = "a string of " + std::to_string(length) + " bytes";
        return nullptr;
    }
    reply.str.assign(text, length);
    return place(task, std::move(reply));
}

void* createArray(const redisReadTask* task, int elements) {
    ReplyReader::Building& b = building(task);
    size_t depth = 1;
    for (const redisReadTask* up = task->parent; up != nullptr; up = up->parent) ++depth;
    if (depth > b.limits.max_depth) {
        b.error = "arrays nested deeper than " + std::to_string(b.limits.max_depth);
        return nullptr;
    }
    // Debian's hiredis refuses lengths below -1 itself; 0.14 as released
    // takes them as an empty array.
    if (elements < 0) {
        b.error = "an array of length " + std::to_string(elements);
        return nullptr;
    }
    Reply reply;
    reply.kind = Reply::Kind::array;
    reply.elements.reserve(size_t(std::min(elements, kReserveAtMost)));
    return place(task, std::move(reply));
}

void* createInteger(const redisReadTask* task, long long value) {
    Reply reply;
    reply.kind = Reply::Kind::integer;
    reply.integer = value;
    return place(task, std::move(reply));
}

void* createNil(const redisReadTask* task) { return place(task, Reply{}); }

// hiredis frees only the root (on an error, or with the reader); the
// elements live inside it.
void freeObject(void* reply) { delete static_cast<Reply*>(reply); }

redisReplyObjectFunctions kFunctions = {createString, createArray, createInteger, createNil, freeObject};

void appendLength(std::string& out, char type, size_t length) {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, length);
    out += type;
    out.append(digits, end);
    out += "\r\n";
}

}  // namespace

ReplyReader::ReplyReader(ReaderLimits limits) : limits_(limits), building_(std::make_unique<Building>()) {
    building_->limits = limits;
    reader_ = redisReaderCreateWithFunctions(&kFunctions);
    if (reader_ == nullptr) throw std::bad_alloc();
    // Each task hands the callbacks the reader's privdata.
    reader_->privdata = building_.get();
}

ReplyReader::~ReplyReader() { redisReaderFree(reader_); }

void ReplyReader::fail(std::string error) { error_ = error.empty() ? std::string("protocol error") : std::move(error); }

void ReplyReader::feed(std::string_view bytes) {
    if (broken() || bytes.empty()) return;
    if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK) fail(reader_->errstr);
}

std::optional<Reply> ReplyReader::next() {
    if (broken()) return std::nullopt;
    void* out = nullptr;
    if (redisReaderGetReply(reader_, &out) != REDIS_OK) {
        fail(!building_->error.empty() ? building_->error : std::string(reader_->errstr));
        return std::nullopt;
    }
    if (out == nullptr) {
        // What waits in the buffer is one unfinished reply: bound it too
        // (a bulk string's bytes are only seen once all have come).
        const size_t unread = reader_->len - reader_->pos;
        if (building_->bytes + unread > limits_.max_reply_bytes + kElementCost)
            fail("a reply larger than " + std::to_string(limits_.max_reply_bytes) + " bytes");
        return std::nullopt;
    }
    std::unique_ptr<Reply> root(static_cast<Reply*>(out));
    building_->bytes = 0;
    return std::move(*root);
}

void appendCommand(std::string& out, const std::vector<std::string>& argv) {
    appendLength(out, '*', argv.size());
    for (const std::string& arg : argv) {
        appendLength(out, '$', arg.size());
        out += arg;
        out += "\r\n";
    }
}

std::string formatCommand(const std::vector<std::string>& argv) {
    std::string out;
    size_t size = 16;
    for (const std::string& arg : argv) size += arg.size() + 16;
    out.reserve(size);
    appendCommand(out, argv);
    return out;
}

namespace {

void describeInto(std::string& out, const Reply& reply) {
    constexpr size_t kShown = 200;
    if (out.size() > kShown) return;
    switch (reply.kind) {
        case Reply::Kind::nil: out += "(nil)"; break;
        case Reply::Kind::integer: out += std::to_string(reply.integer); break;
        case Reply::Kind::string: out += '"' + reply.str.substr(0, kShown) + '"'; break;
        case Reply::Kind::status:
        case Reply::Kind::error: out += reply.str.substr(0, kShown); break;
        case Reply::Kind::array:
            out += '[';
            for (size_t i = 0; i < reply.elements.size() && out.size() <= kShown; ++i) {
                if (i) out += ", ";
                describeInto(out, reply.elements[i]);
            }
            out += ']';
            break;
    }
}

}  // namespace

std::string describe(const Reply& reply) {
    std::string out;
    describeInto(out, reply);
    return out;
}

}  // namespace dpgate::gateway::redis
