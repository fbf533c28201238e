// Up/down hysteresis of one backend from its active probes: `fall`
// consecutive failures take it down, `rise` consecutive successes bring it
// back. Pure: the caller feeds probe outcomes; no clock, no socket.
#pragma once

#include <cstdint>

namespace dpgate::routing {

class HealthState {
public:
    enum class Status { unknown, up, down };

    HealthState(uint32_t fall, uint32_t rise) : fall_(fall), rise_(rise) {}

    // A backend nobody has probed yet is unknown, not down, and takes its
    // first verdict at once: a gateway that starts beside healthy backends
    // serves after one probe, and one beside a backend that answers but
    // fails (an error status, another model, no answer in time) calls it
    // down after one probe. One exception: a backend nobody could connect to
    // (`reached` false) may still be starting (the gateway came up first), so
    // it stays unknown for up to `fall` such probes, as long as an up
    // backend would stay up.
    void probeSucceeded() {
        suspect_ = false;
        failures_ = 0;
        ++successes_;
        if (status_ == Status::unknown || successes_ >= rise_) status_ = Status::up;
    }

    void probeFailed(bool reached = true) {
        successes_ = 0;
        ++failures_;
        const bool first_verdict = status_ == Status::unknown && reached;
        if (first_verdict || failures_ >= fall_) status_ = Status::down;
    }

    // Passive evidence (a refused connection, a 502/503/504): the backend
    // takes no new requests until a probe succeeds again.
    void suspect() { suspect_ = true; }

    Status status() const { return status_; }
    bool probed() const { return status_ != Status::unknown; }
    bool up() const { return status_ == Status::up && !suspect_; }
    bool suspected() const { return suspect_; }

private:
    uint32_t fall_;
    uint32_t rise_;
    uint32_t successes_ = 0;
    uint32_t failures_ = 0;
    Status status_ = Status::unknown;
    bool suspect_ = false;
};

}  // namespace dpgate::routing
