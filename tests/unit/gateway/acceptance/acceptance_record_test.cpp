// Acceptance records, the record store and the persisted roles (pure parts).
#include "gateway/acceptance/acceptance_record.hpp"
#include "gateway/acceptance/record_store.hpp"
#include "gateway/acceptance/role_state.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace dpgate::acceptance {
namespace {

AcceptanceRecord sample() {
    AcceptanceRecord r;
    r.backend = "standby";
    r.url = "http://10.0.0.2:8000";
    r.time = "2026-12-03T18:04:05Z";
    r.passed = true;
    r.configured_window = 1048576;
    r.dp_ranks = 8;
    r.identity = {"ds-v4.1-flash-1017", 1048576, "0.9.1", "uvicorn"};
    r.dpgate_version = "0.16.0";
    r.config_digest = std::string(64, 'a');
    r.template_digest = std::string(64, 'b');
    r.tokenizer_digest = std::string(64, 'c');
    r.checks = {{"models", true, "ok"}, {"window_edge", true, "ok"}};
    return r;
}

class Folder {
public:
    Folder() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = std::filesystem::temp_directory_path() /
                ("dpgate_acceptance_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~Folder() { std::filesystem::remove_all(path_); }
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    std::string path() const { return path_.string(); }

private:
    std::filesystem::path path_;
};

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(AcceptanceRecord, RoundTripsThroughItsJson) {
    std::string error;
    std::optional<AcceptanceRecord> back = parseRecord(recordJson(sample()), error);
    ASSERT_TRUE(back) << error;
    EXPECT_EQ(*back, sample());
    // Not reported: null in the file, empty in memory.
    AcceptanceRecord quiet = sample();
    quiet.identity.version.clear();
    EXPECT_NE(recordJson(quiet).find("\"version\": null"), std::string::npos);
    EXPECT_EQ(*parseRecord(recordJson(quiet), error), quiet);
}

TEST(AcceptanceRecord, RefusesWhatIsNotAWholeRecord) {
    std::string error;
    std::string text = recordJson(sample());
    EXPECT_FALSE(parseRecord(text.substr(0, text.size() / 2), error));
    EXPECT_EQ(error, "not JSON");
    EXPECT_FALSE(parseRecord("[]", error));
    EXPECT_FALSE(parseRecord(R"({"format":"other/1"})", error));
    EXPECT_EQ(error, "format is not dpgate-acceptance/1");
    std::string missing = text;
    missing.replace(missing.find("\"url\""), 5, "\"uri\"");
    EXPECT_FALSE(parseRecord(missing, error));
    EXPECT_EQ(error, "missing field 'url'");
    // Checks are compared by name: a name twice is not a record dpgate wrote
    // (found by fuzz_acceptance: the copy compared unequal to itself).
    AcceptanceRecord twice = sample();
    twice.checks.push_back(twice.checks[0]);
    EXPECT_FALSE(parseRecord(recordJson(twice), error));
    EXPECT_EQ(error, "check 'models' appears twice");
    // A record claiming to pass with a failed check is not believed.
    AcceptanceRecord lying = sample();
    lying.checks[1].passed = false;
    EXPECT_FALSE(parseRecord(recordJson(lying), error));
    EXPECT_EQ(error, "'passed' is true but check 'window_edge' failed");
}

TEST(AcceptanceRecord, FileNamesAreSafeAndSortByTime) {
    EXPECT_EQ(recordFileName("standby", "2026-12-03T18:04:05Z"), "accept-standby-20261203T180405Z.json");
    EXPECT_EQ(recordFileName("../a b", "2026-12-03T18:04:05Z"), "accept-.._a_b-20261203T180405Z.json");
}

TEST(AcceptanceRecord, IdentityDifferencesNameEachField) {
    BackendIdentity now = sample().identity;
    EXPECT_TRUE(identityDifferences(sample().identity, now).empty());
    now.version = "0.9.2";
    now.max_model_len = 524288;
    EXPECT_EQ(identityDifferences(sample().identity, now),
              (std::vector<std::string>{"max_model_len 524288 (the record says 1048576)",
                                        "version '0.9.2' (the record says '0.9.1')"}));
    now = sample().identity;
    now.server.clear();
    EXPECT_EQ(identityDifferences(sample().identity, now),
              std::vector<std::string>{"server none (the record says 'uvicorn')"});
}

TEST(AcceptanceRecord, CompareListsIdentityDigestsAndVerdicts) {
    AcceptanceRecord after = sample();
    EXPECT_TRUE(compareRecords(sample(), after).empty());
    after.identity.version = "0.9.2";
    after.tokenizer_digest = std::string(64, 'd');
    after.passed = false;
    after.checks[1] = {"window_edge", false, "one token over was admitted"};
    after.checks.push_back({"count_agreement", false, "x"});
    std::vector<std::string> lines = compareRecords(sample(), after);
    EXPECT_EQ(lines, (std::vector<std::string>{
                         "identity.version: '0.9.1' -> '0.9.2'",
                         "dpgate.tokenizer_digest: '" + std::string(64, 'c') + "' -> '" + std::string(64, 'd') + "'",
                         "passed: true -> false",
                         "check window_edge: PASS -> FAIL (one token over was admitted)",
                         "check count_agreement: new, FAIL",
                     }));
}

TEST(RecordStore, FindsTheNewestMatchingPassingRecordAndSaysWhyNot) {
    Folder folder;
    RecordStore store(folder.path());
    std::string why;
    store.refresh();
    EXPECT_FALSE(store.matching("standby", "http://10.0.0.2:8000", sample().identity, why));
    EXPECT_EQ(why, "it has no passing acceptance record in " + folder.path());

    AcceptanceRecord old = sample();
    old.time = "2026-11-01T00:00:00Z";
    old.identity.version = "0.9.0";
    old.identity.max_model_len = 524288;
    write(folder.file("accept-standby-1.json"), recordJson(old));
    AcceptanceRecord failed = sample();
    failed.time = "2026-12-04T00:00:00Z";
    failed.passed = false;
    failed.checks[0].passed = false;
    write(folder.file("accept-standby-3.json"), recordJson(failed));
    write(folder.file("accept-standby-broken.json"), "{");
    write(folder.file("notes.json"), recordJson(sample()));  // not named like a record: ignored
    store.refresh();
    EXPECT_FALSE(store.matching("standby", "http://10.0.0.2:8000", sample().identity, why));
    EXPECT_EQ(why,
              "its newest passing acceptance record (2026-11-01T00:00:00Z) does not match what it reports now: "
              "max_model_len 1048576 (the record says 524288); version '0.9.1' (the record says '0.9.0')");
    EXPECT_EQ(store.acceptedWindow("standby", "http://10.0.0.2:8000", "ds-v4.1-flash-1017"), 524288u);
    EXPECT_EQ(store.latest("standby", "http://10.0.0.2:8000")->record, failed);
    ASSERT_EQ(store.unreadable().size(), 1u);

    write(folder.file("accept-standby-2.json"), recordJson(sample()));
    store.refresh();
    auto found = store.matching("standby", "http://10.0.0.2:8000", sample().identity, why);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->file, folder.file("accept-standby-2.json"));
    EXPECT_EQ(store.acceptedWindow("standby", "http://10.0.0.2:8000", "ds-v4.1-flash-1017"), 1048576u);
    // Another machine under the same name is not accepted by this record.
    EXPECT_FALSE(store.matching("standby", "http://10.0.0.9:8000", sample().identity, why));
    EXPECT_EQ(store.acceptedWindow("standby", "http://10.0.0.9:8000", "ds-v4.1-flash-1017"), 0u);

    std::filesystem::remove(folder.file("accept-standby-2.json"));
    store.refresh();
    EXPECT_FALSE(store.matching("standby", "http://10.0.0.2:8000", sample().identity, why));
}

TEST(RecordStore, WithoutAFolderNothingIsAccepted) {
    RecordStore store("");
    store.refresh();
    std::string why;
    EXPECT_FALSE(store.matching("a", "http://h:1", sample().identity, why));
    EXPECT_EQ(why, "acceptance.dir is not set, so there are no acceptance records");
}

conf::Config twoBackends() {
    conf::Config config;
    conf::BackendConfig a, b;
    a.name = "primary";
    b.name = "standby";
    b.role = conf::BackendRole::standby;
    config.backends = {a, b};
    return config;
}

RoleState sampleState() {
    RoleState s;
    s.model_id = "ds-v4.1-flash-1017";
    s.backends = {"primary", "standby"};
    s.primary = "standby";
    s.drained = {"primary"};
    s.flips = {{"alice", "2026-12-03T18:00:00Z", "primary", "standby", false, "accept-standby-20261203T175900Z.json"}};
    s.written_at = "2026-12-03T18:00:01Z";
    return s;
}

TEST(RoleState, RoundTripsAndIsWrittenAtomically) {
    Folder folder;
    const std::string path = stateFilePath(folder.path() + "/new");  // the folder is created
    ASSERT_EQ(writeFileAtomically(path, stateJson(sampleState())), "");
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::string error;
    std::optional<RoleState> back = parseState(text, error);
    ASSERT_TRUE(back) << error;
    EXPECT_EQ(*back, sampleState());
    EXPECT_EQ(foreignReason(*back, twoBackends()), "");
    // No temporary file is left beside it.
    size_t files = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(folder.path() + "/new")) ++files;
    EXPECT_EQ(files, 1u);
    EXPECT_NE(writeFileAtomically("/proc/dpgate-no/state.json", "x"), "");
}

TEST(RoleState, TruncatedOrForeignStateIsRefused) {
    std::string text = stateJson(sampleState());
    std::string error;
    EXPECT_FALSE(parseState(text.substr(0, text.size() - 10), error));
    EXPECT_EQ(error, "not JSON (truncated or damaged)");
    EXPECT_FALSE(parseState("", error));
    EXPECT_EQ(error, "the file is empty");
    RoleState bad = sampleState();
    bad.primary = "elsewhere";
    EXPECT_FALSE(parseState(stateJson(bad), error));
    EXPECT_EQ(error, "the primary 'elsewhere' is not among its backends");

    RoleState other = sampleState();
    other.backends = {"primary", "standby", "third"};
    EXPECT_EQ(foreignReason(other, twoBackends()), "it names the backends [primary, standby, third], not the config's");
    other = sampleState();
    other.model_id = "another-model";
    EXPECT_EQ(foreignReason(other, twoBackends()),
              "it is for model 'another-model', the config serves 'ds-v4.1-flash-1017'");
}

}  // namespace
}  // namespace dpgate::acceptance
