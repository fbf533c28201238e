#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dpgate::gateway {

// Fresh request ids for one worker: 128 bits from two steps of splitmix64
// (a counter through a bijective mix), so a worker never repeats an id
// within 2^63 requests, and workers differ by their random seeds. Not
// secret: an id names a request in logs, it grants nothing. mt19937_64 took
// 360 instructions per request for the same.
class RequestIdSource {
public:
    explicit RequestIdSource(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

private:
    std::uint64_t state_;
};

// The client's X-Request-ID when it is a sane token (1-128 visible ASCII
// characters), else a fresh 128-bit hex id: log lines and upstream logs must
// not be injectable through it.
std::string requestIdFor(std::string_view client_value, RequestIdSource& ids);
// The same, written over `id` in the buffer it has (a connection's access
// record keeps one across its requests: no allocation per request).
void assignRequestId(std::string& id, std::string_view client_value, RequestIdSource& ids);

}  // namespace dpgate::gateway
