#include "gateway/ops/status_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

using namespace dpgate::gateway::ctl;

namespace {

// Two backends of one rank each: one accepted and serving, one drained,
// down and unknown (every backend-reported number null).
nlohmann::json twoBackends() {
    return nlohmann::json::parse(R"({
      "model": "m", "configured_window": 1048576, "public_window": 524288, "routing_mode": "affinity",
      "roles": {"source": "state", "since": "2026-12-01T10:00:00Z", "file": "/s/roles.json", "last_write_error": null},
      "last_flip": {"who": "ana@ctl", "at": "2026-12-02T09:00:00Z", "from": "a", "to": "b", "forced": true},
      "failover_unaccepted": null,
      "backends": [
        {"name": "a", "role": "standby", "healthy": true, "routable": true, "drained": false, "window": 1048576,
         "identity": {"model_id": "m", "window": 1048576, "version": "0.9", "server": "vllm"},
         "acceptance": {"time": "2026-12-01T08:00:00Z", "passed": true, "identity_match": true,
                        "identity_differences": [], "failed": []},
         "accepted": true, "accepted_window": 1048576,
         "slots": [{"rank": 0, "queued_prefill_tokens": 10, "recent_prefill_tokens": 2000, "running": 3.0,
                    "waiting": 0.0, "kv_cache_usage": 0.25, "prefix_cache_hit_ratio": 1.0}]},
        {"name": "bb", "role": "primary", "healthy": false, "routable": false, "drained": true, "window": null,
         "identity": null, "acceptance": null, "accepted": false, "accepted_window": null,
         "slots": [{"rank": 0, "queued_prefill_tokens": 0, "recent_prefill_tokens": 0, "running": null,
                    "waiting": null, "kv_cache_usage": null, "prefix_cache_hit_ratio": null}]}
      ]})");
}

}  // namespace

TEST(CtlStatusTable, HeaderBackendsAndRanksAligned) {
    std::vector<std::string> expected = {
        "model m  public window 524288 (configured 1048576)  routing affinity",
        "roles from state since 2026-12-01T10:00:00Z  last flip 2026-12-02T09:00:00Z a -> b by ana@ctl (forced)",
        "",
        "BACKEND  ROLE     HEALTH   STATE     WINDOW   ACCEPTED  IDENTITY  ACCEPTANCE",
        "a        standby  healthy  routable  1048576  1048576   0.9 vllm  2026-12-01T08:00:00Z PASS identity ok",
        "bb       primary  down     drained   -        no        -         none",
        "",
        "BACKEND  RANK  QUEUED_PREFILL  RECENT_PREFILL  RUNNING  WAITING  KV_USAGE  CACHE_HIT",
        "a        0     10              2000            3        0        0.250     1.000",
        "bb       0     0               0               -        -        -         -",
    };
    EXPECT_EQ(statusTable(twoBackends()), expected);
}

TEST(CtlStatusTable, FailoverToAnUnacceptedStandbyIsLoud) {
    nlohmann::json status = twoBackends();
    status["failover_unaccepted"] = {{"backend", {"bb"}},
                                     {"at", "2026-12-03T01:02:03Z"},
                                     {"blocked", false},
                                     {"message", "primary a is down; serving from bb, which is not accepted"}};
    status["roles"]["last_write_error"] = "rename: no space left";
    std::vector<std::string> lines = statusTable(status);
    ASSERT_GE(lines.size(), 4u);
    EXPECT_EQ(lines[2], "!! roles not persisted: rename: no space left");
    EXPECT_EQ(lines[3],
              "!! FAILOVER TO UNACCEPTED STANDBY bb at 2026-12-03T01:02:03Z: primary a is down; serving from bb, "
              "which is not accepted");
}

TEST(CtlStatusTable, FailedAcceptanceNamesChecksAndIdentityDifferences) {
    nlohmann::json status = twoBackends();
    status["backends"][0]["acceptance"] = {{"time", "T"},
                                           {"passed", false},
                                           {"identity_match", false},
                                           {"identity_differences", {"version 0.8 -> 0.9"}},
                                           {"failed", {"models", "stream"}}};
    std::vector<std::string> lines = statusTable(status);
    EXPECT_TRUE(lines[4].ends_with("T FAIL(models,stream) IDENTITY DIFFERS (version 0.8 -> 0.9)")) << lines[4];
}

TEST(CtlStatusTable, InFlightColumnOnlyWhenReported) {
    nlohmann::json status = twoBackends();
    EXPECT_EQ(statusTable(status)[7].find("IN_FLIGHT"), std::string::npos);
    status["backends"][0]["slots"][0]["in_flight"] = 4;
    std::vector<std::string> lines = statusTable(status);
    EXPECT_EQ(lines[7],
              "BACKEND  RANK  IN_FLIGHT  QUEUED_PREFILL  RECENT_PREFILL  RUNNING  WAITING  KV_USAGE  CACHE_HIT");
    EXPECT_TRUE(lines[8].starts_with("a        0     4          10")) << lines[8];
    EXPECT_TRUE(lines[9].starts_with("bb       0     -          0")) << lines[9];
}

TEST(CtlStatusTable, OtherShapesShowDashesAndNeverThrow) {
    for (const char* text :
         {"null", "[]", "42", "{}", R"({"backends": 3, "roles": []})", R"({"backends": [{"slots": [{}]}, 7]})"}) {
        std::vector<std::string> lines;
        EXPECT_NO_THROW(lines = statusTable(nlohmann::json::parse(text))) << text;
        ASSERT_FALSE(lines.empty()) << text;
        EXPECT_EQ(lines[0], "model -  public window - (configured -)  routing -") << text;
    }
}

TEST(CtlStatusTable, CellText) {
    EXPECT_EQ(cellText(nullptr), "-");
    EXPECT_EQ(cellText(""), "-");
    EXPECT_EQ(cellText("x"), "x");
    EXPECT_EQ(cellText(true), "yes");
    EXPECT_EQ(cellText(false), "no");
    EXPECT_EQ(cellText(12), "12");
    EXPECT_EQ(cellText(0.1234), "0.123");
    EXPECT_EQ(cellText(nlohmann::json::parse("0.0")), "0");
    EXPECT_EQ(cellText(nlohmann::json::parse("17.0")), "17");
    EXPECT_EQ(ratioText(nlohmann::json::parse("0.0")), "0.000");
    EXPECT_EQ(ratioText(nlohmann::json::parse("1")), "1.000");
    EXPECT_EQ(ratioText(nullptr), "-");
}

TEST(CtlStatusTable, ABackendNotProbedYetIsNotCalledDown) {
    nlohmann::json status = twoBackends();
    status["backends"][1]["probed"] = false;
    std::vector<std::string> lines = statusTable(status);
    EXPECT_TRUE(lines[5].starts_with("bb       primary  not probed yet")) << lines[5];
    status["backends"][1]["probed"] = true;
    EXPECT_TRUE(statusTable(status)[5].starts_with("bb       primary  down ")) << statusTable(status)[5];
}

// The "health" field names the tri-state; "unknown" is shown as such, never as down.
TEST(CtlStatusTable, HealthUnknownIsShownAsUnknown) {
    nlohmann::json status = twoBackends();
    status["backends"][1]["health"] = "unknown";
    status["backends"][1]["healthy"] = false;
    status["backends"][1]["probed"] = false;
    std::vector<std::string> lines = statusTable(status);
    EXPECT_TRUE(lines[5].starts_with("bb       primary  not probed yet (unknown)")) << lines[5];
    status["backends"][1]["health"] = "down";
    status["backends"][1]["probed"] = true;
    EXPECT_TRUE(statusTable(status)[5].starts_with("bb       primary  down ")) << statusTable(status)[5];
}

TEST(CtlStatusTable, ReplicasShowWhoLagsAndWhoRunsAnotherConfig) {
    nlohmann::json status = twoBackends();
    status["control"] = {
        {"store", "etcd"},  {"prefix", "/dpgate/"},  {"revision", 42},     {"applied_at", "T1"},
        {"source", "etcd"}, {"replica_id", "pod-a"}, {"reachable", false}, {"last_error", "connect: refused"}};
    status["replicas"] = nlohmann::json::parse(R"([
      {"id": "pod-a", "version": "0.1.0", "config_digest": "0123456789abcdef0123", "primary": "b", "revision": 42,
       "backends_up": ["a", "b"], "last_seen": "T2", "self": true, "lagging": false, "other_config": false},
      {"id": "pod-b", "version": "0.1.0", "config_digest": "ffff456789abcdef0123", "primary": "a", "revision": 40,
       "backends_up": [], "last_seen": "T0", "self": false, "lagging": true, "other_config": true}])");
    const std::vector<std::string> lines = statusTable(status);
    auto has = [&lines](const std::string& text) { return std::find(lines.begin(), lines.end(), text) != lines.end(); };
    EXPECT_TRUE(has("control etcd /dpgate/ revision 42 (applied T1, roles from etcd)  replica pod-a"));
    EXPECT_TRUE(
        has("!! ETCD UNREACHABLE: serving with the roles last applied; flips and drains are refused "
            "(connect: refused)"));
    EXPECT_TRUE(has("REPLICA  VERSION  CONFIG        PRIMARY  REVISION  BACKENDS_UP  LAST_SEEN  FLAGS"));
    EXPECT_TRUE(has("pod-a    0.1.0    0123456789ab  b        42        a,b          T2         this one"));
    EXPECT_TRUE(has("pod-b    0.1.0    ffff456789ab  a        40        none         T0         LAGGING,OTHER CONFIG"));
    // Without control.etcd, one line says so and no replica table is drawn.
    status["control"] = {{"store", "local"}};
    status["replicas"] = nlohmann::json::array();
    const std::vector<std::string> local = statusTable(status);
    EXPECT_NE(std::find(local.begin(), local.end(), "control local (each replica its own roles)"), local.end());
}

TEST(CtlUsageTable, HeaviestKeyFirstWithItsBudgetsAndWhoseCountItIs) {
    const nlohmann::json usage = nlohmann::json::parse(R"({
      "day": 20430,
      "store": {"store": "redis", "address": "10.0.0.5:6379", "reachable": false, "error": "connect: refused",
                "on_store_unavailable": "local"},
      "keys": [
        {"key": "light", "limits": {"requests_per_min": 0, "requests_per_day": 0, "tokens_per_min": 50000,
                                    "tokens_per_day": 0},
         "last_minute": {"tokens": 10, "requests": 1}, "today": {"tokens": 100, "requests": 2, "scope": "replica"}},
        {"key": "heavy", "limits": {"requests_per_min": 60, "requests_per_day": 0, "tokens_per_min": 0,
                                    "tokens_per_day": 9000000},
         "last_minute": {"tokens": 0, "requests": 0}, "today": {"tokens": 123456, "requests": 40, "scope": "shared"}}
      ]})");
    const std::vector<std::string> lines = usageTable(usage);
    ASSERT_EQ(lines.size(), 5u);
    EXPECT_EQ(lines[0],
              "budgets in redis 10.0.0.5:6379 (AWAY: connect: refused)  on_store_unavailable local  UTC day 20430");
    EXPECT_EQ(lines[2].substr(0, 3), "KEY");
    EXPECT_EQ(lines[3].substr(0, 5), "heavy");
    EXPECT_EQ(lines[4].substr(0, 5), "light");
    auto words = [](const std::string& line) {
        std::vector<std::string> out;
        std::istringstream in(line);
        for (std::string w; in >> w;) out.push_back(w);
        return out;
    };
    EXPECT_EQ(words(lines[3]),
              (std::vector<std::string>{"heavy", "0", "0", "123456", "40", "shared", "-", "9000000", "60", "-"}));
    EXPECT_EQ(words(lines[4]),
              (std::vector<std::string>{"light", "10", "1", "100", "2", "replica", "50000", "-", "-", "-"}));
}

TEST(CtlUsageTable, OtherShapesNeverThrow) {
    for (const char* text : {"null", "[]", "{}", R"({"keys": 3})", R"({"keys": [1, {"today": 2}]})"})
        EXPECT_NO_THROW(usageTable(nlohmann::json::parse(text))) << text;
}
