// The request path's routing stages without sockets: the Router's plans and
// slot leases, and forwardWithRetry driven through a scripted
// UpstreamConnector (the seam UpstreamExchange implements).
#include "gateway/path/retry.hpp"

#include "two_backends.hpp"

#include <gtest/gtest.h>

#include <deque>

using namespace dpgate;
using namespace dpgate::gateway;
using test::good;
using test::twoBackends;

namespace {

UpstreamAnswer answered(unsigned status) { return {UpstreamAnswer::Kind::answered, status, ""}; }
UpstreamAnswer failed() { return {UpstreamAnswer::Kind::failed, 0, "Connection refused"}; }

// Plays back one answer per try and remembers where each try went, and
// what the Router held for that slot while the try ran.
class ScriptedConnector final : public UpstreamConnector {
public:
    ScriptedConnector(Router& router, std::deque<UpstreamAnswer> script)
        : router_(router), script_(std::move(script)) {}

    struct Try {
        std::string backend;
        uint32_t rank;
        int64_t queued;
    };
    std::vector<Try> tries;

    awaitable<UpstreamAnswer> send(const SlotLease& slot) override {
        tries.push_back({slot.backendName(), slot.rank(), router_.queuedPrefill(slot.backend(), slot.rank())});
        UpstreamAnswer next = script_.empty() ? failed() : script_.front();
        if (!script_.empty()) script_.pop_front();
        co_return next;
    }

private:
    Router& router_;
    std::deque<UpstreamAnswer> script_;
};

struct Fixture {
    conf::Config config = twoBackends();
    BackendRegistry registry{config};
    Router router{registry, config};

    Fixture() {
        registry.recordProbe(0, good());
        registry.recordProbe(1, good());
    }

    Forwarded forward(ScriptedConnector& upstream, double prompt_tokens, std::optional<uint32_t> pin = std::nullopt,
                      std::vector<std::string>* retries = nullptr) {
        const RoutePlan plan = router.plan(42, prompt_tokens);
        EXPECT_FALSE(plan.empty());
        RetryObserver observer = [retries](const SlotLease& from, const std::string& why, const SlotLease& to) {
            if (retries)
                retries->push_back(from.backendName() + "/" + std::to_string(from.rank()) + " " + why + " -> " +
                                   to.backendName());
        };
        net::io_context io;
        std::optional<Forwarded> out;
        net::co_spawn(io, forwardWithRetry(router, plan, pin, upstream, observer),
                      [&](std::exception_ptr failure, Forwarded forwarded) {
                          if (failure) std::rethrow_exception(failure);
                          out = std::move(forwarded);
                      });
        io.run();
        EXPECT_TRUE(out.has_value());
        return std::move(*out);
    }

    int64_t queuedEverywhere() const {
        int64_t sum = 0;
        for (size_t b = 0; b < 2; ++b)
            for (uint32_t r = 0; r < 8; ++r) sum += router.queuedPrefill(b, r);
        return sum;
    }
    double workEverywhere() const {
        double sum = 0;
        auto now = std::chrono::steady_clock::now();
        for (size_t b = 0; b < 2; ++b)
            for (uint32_t r = 0; r < 8; ++r) sum += router.recentWork(b, r, now);
        return sum;
    }
};

}  // namespace

TEST(Retry, AnAnswerOnTheFirstTryIsNotRetriedAndTheLeaseHoldsItsSlot) {
    Fixture f;
    ScriptedConnector upstream(f.router, {answered(200)});
    Forwarded out = f.forward(upstream, 1000);
    ASSERT_EQ(upstream.tries.size(), 1u);
    EXPECT_EQ(upstream.tries[0].backend, "primary");
    EXPECT_EQ(upstream.tries[0].queued, 1000) << "the lease charges its slot before the try";
    EXPECT_EQ(out.retries, 0u);
    EXPECT_EQ(out.answer.kind, UpstreamAnswer::Kind::answered);
    EXPECT_EQ(f.queuedEverywhere(), 1000) << "held until the prefill is over";
    out.lease.prefillDone();
    EXPECT_EQ(f.queuedEverywhere(), 0);
    EXPECT_NEAR(f.workEverywhere(), 1000, 0.1);  // the meter decays over its window
}

TEST(Retry, AConnectFailureRetriesOnTheStandbyAndGivesTheFailedSlotBack) {
    Fixture f;
    ScriptedConnector upstream(f.router, {failed(), answered(200)});
    std::vector<std::string> retries;
    Forwarded out = f.forward(upstream, 1000, std::nullopt, &retries);
    ASSERT_EQ(upstream.tries.size(), 2u);
    EXPECT_EQ(upstream.tries[0].backend, "primary");
    EXPECT_EQ(upstream.tries[1].backend, "standby") << "the failure suspected the primary: failover";
    EXPECT_EQ(out.retries, 1u);
    ASSERT_EQ(retries.size(), 1u);
    EXPECT_EQ(retries[0], "primary/" + std::to_string(upstream.tries[0].rank) + " Connection refused -> standby");
    EXPECT_FALSE(f.registry.routable(0));
    // Only the standby's slot holds load and work now.
    EXPECT_EQ(f.queuedEverywhere(), 1000);
    EXPECT_EQ(f.router.queuedPrefill(1, out.lease.rank()), 1000);
    EXPECT_NEAR(f.workEverywhere(), 1000, 0.1);  // the meter decays over its window
}

TEST(Retry, ABusyBackendIsTriedTwiceAtMostAndTheLastAnswerGoesBack) {
    Fixture f;
    ScriptedConnector upstream(f.router, {answered(503), answered(502), answered(200)});
    Forwarded out = f.forward(upstream, 10);
    EXPECT_EQ(upstream.tries.size(), 2u);
    EXPECT_EQ(out.answer.kind, UpstreamAnswer::Kind::answered);
    EXPECT_EQ(out.answer.status, 502u);
    EXPECT_EQ(out.retries, 1u);
}

TEST(Retry, AFirstByteTimeoutIsNotRetriedNorSuspected) {
    Fixture f;
    ScriptedConnector upstream(f.router, {{UpstreamAnswer::Kind::timed_out, 0, "timeout"}, answered(200)});
    Forwarded out = f.forward(upstream, 10);
    EXPECT_EQ(upstream.tries.size(), 1u);
    EXPECT_EQ(out.answer.kind, UpstreamAnswer::Kind::timed_out);
    EXPECT_TRUE(f.registry.routable(0)) << "the backend may still be working on it";
}

TEST(Retry, AClientThatLeftEndsTheRequest) {
    Fixture f;
    ScriptedConnector upstream(f.router, {{UpstreamAnswer::Kind::client_gone, 0, ""}, answered(200)});
    Forwarded out = f.forward(upstream, 10);
    EXPECT_EQ(upstream.tries.size(), 1u);
    EXPECT_EQ(out.answer.kind, UpstreamAnswer::Kind::client_gone);
}

TEST(Retry, APinnedRankAppliesToTheFirstTryOnly) {
    Fixture f;
    ScriptedConnector upstream(f.router, {failed(), answered(200)});
    f.forward(upstream, 10, 5);
    ASSERT_EQ(upstream.tries.size(), 2u);
    EXPECT_EQ(upstream.tries[0].backend, "primary");
    EXPECT_EQ(upstream.tries[0].rank, 5u);
    EXPECT_EQ(upstream.tries[1].backend, "standby");
}

TEST(Retry, APinBeyondTheBackendsRanksIsIgnored) {
    Fixture f;
    const RoutePlan plan = f.router.plan(42, 10);
    const uint32_t planned = plan.table->chooser.slots()[plan.preference[0]].rank;
    SlotLease lease = f.router.lease(plan, 0, 8);
    EXPECT_EQ(lease.rank(), planned);
}

TEST(SlotLease, ReleasesItsLoadOnceHoweverItEnds) {
    Fixture f;
    const RoutePlan plan = f.router.plan(7, 500);
    {
        SlotLease lease = f.router.lease(plan, 0);
        EXPECT_EQ(f.queuedEverywhere(), 500);
        SlotLease moved = std::move(lease);
        EXPECT_EQ(f.queuedEverywhere(), 500) << "a move transfers the hold";
        moved.prefillDone();
        moved.prefillDone();
        EXPECT_EQ(f.queuedEverywhere(), 0);
    }
    EXPECT_EQ(f.queuedEverywhere(), 0) << "no second release at destruction";
    {
        // Another conversation: the first one's prompt is now expected in
        // that slot's cache, so a lease of it there would charge nothing.
        SlotLease lease = f.router.lease(f.router.plan(8, 500), 0);
        EXPECT_EQ(f.queuedEverywhere(), 500);
    }
    EXPECT_EQ(f.queuedEverywhere(), 0) << "released at destruction";
}

TEST(SlotLease, TheAnswersUsageCorrectsTheWorkCharge) {
    Fixture f;
    const RoutePlan plan = f.router.plan(9, 1000);
    SlotLease lease = f.router.lease(plan, 0);
    EXPECT_NEAR(f.workEverywhere(), 1000, 0.1);  // the meter decays over its window
    Usage usage;
    usage.prompt_tokens = 1000;
    usage.cached_prompt_tokens = 600;
    lease.answered(usage);
    EXPECT_NEAR(f.workEverywhere(), 400, 0.1);
    lease.abandon();
    EXPECT_NEAR(f.workEverywhere(), 0, 0.1);
    EXPECT_FALSE(lease.held());
}

TEST(Router, TheSecondTurnOfAConversationGoesWhereTheFirstWent) {
    Fixture f;
    const RoutePlan first = f.router.plan(1234, 2000);
    SlotLease lease = f.router.lease(first, 0);
    const uint32_t rank = lease.rank();
    lease.prefillDone();
    const RoutePlan second = f.router.plan(1234, 2100);
    EXPECT_EQ(second.table->chooser.slots()[second.preference[0]].rank, rank);
}

TEST(Router, AFirstPlanHoldsTheChoosersFirstPreferenceOnly) {
    // The first plan asks the chooser for its choice alone (a retry replans):
    // it must be the head of the full preference order on the same loads,
    // costs and recent work, as new keys' leases pile up and homes get busy.
    Fixture f;
    std::vector<SlotLease> held;
    int spilled = 0;  // keys whose choice was not their home
    for (uint64_t key = 1; key <= 200; ++key) {
        const double prompt = double(100 * (key % 7 + 1));
        const RoutePlan plan = f.router.plan(key, prompt);
        ASSERT_EQ(plan.preference.size(), 1u);
        const auto& chooser = plan.table->chooser;
        std::vector<double> loads(chooser.size()), work(chooser.size());
        for (size_t i = 0; i < chooser.size(); ++i) {
            const routing::Slot& slot = chooser.slots()[i];
            loads[i] = double(f.router.queuedPrefill(slot.backend_index, slot.rank));
            work[i] = f.router.recentWork(slot.backend_index, slot.rank, std::chrono::steady_clock::now());
        }
        const std::vector<size_t> order = chooser.preference({key, loads, plan.uncached, prompt, work, std::nullopt});
        EXPECT_EQ(plan.preference[0], order.front()) << "key " << key;
        spilled += order.front() != chooser.rendezvousOrder(key).front();
        if (key % 4 == 0) held.push_back(f.router.lease(plan, 0));
    }
    EXPECT_GT(spilled, 0) << "busy homes were part of the test";
    // A replan orders every slot but the one that failed.
    const RoutePlan first = f.router.plan(4242, 100);
    SlotLease lease = f.router.lease(first, 0);
    const RoutePlan again = f.router.replan(first, lease);
    EXPECT_EQ(again.preference.size(), first.table->chooser.size() - 1);
}
