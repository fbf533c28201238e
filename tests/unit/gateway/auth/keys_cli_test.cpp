#include "gateway/auth/keys_cli.hpp"

#include "conf/config.hpp"
#include "conf/keys_file.hpp"
#include "conf/sha256_hex.hpp"
#include "conf_test_util.hpp"
#include "gateway/auth/key_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace dpgate::auth {
namespace {

using conf::test::TempDir;

struct CliRun {
    int exit_code;
    std::string out;
    std::string err;
};

CliRun keys(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    std::ostringstream out, err;
    const int code = runKeysCli(static_cast<int>(argv.size()), argv.data(), out, err);
    return {code, out.str(), err.str()};
}

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// The one line `add` prints on stdout.
std::string keyOf(const CliRun& run) {
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_FALSE(run.out.empty());
    EXPECT_EQ(run.out.back(), '\n');
    return run.out.substr(0, run.out.size() - 1);
}

TEST(KeysCli, GeneratedKeysLookRightAndDiffer) {
    std::set<std::string> seen;
    for (int i = 0; i < 200; ++i) {
        const std::string key = generateApiKey();
        ASSERT_EQ(key.size(), 10u + 43u);
        EXPECT_EQ(key.rfind("sk-dpgate-", 0), 0u);
        for (char c : key.substr(10)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << key;
        seen.insert(key);
    }
    EXPECT_EQ(seen.size(), 200u);
}

TEST(KeysCli, AddCreatesA0600FileThatLoadsAndAuthenticates) {
    TempDir dir;
    const std::string file = dir.path() + "/keys.yaml";
    const CliRun run = keys({"add", "alice", "--file", file});
    const std::string key = keyOf(run);
    EXPECT_NE(run.err.find("shown only this once"), std::string::npos);

    struct stat info {};
    ASSERT_EQ(::stat(file.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u);

    const std::string text = readFile(file);
    EXPECT_EQ(text.find(key), std::string::npos) << "the key itself must never be stored";
    EXPECT_EQ(text, "alice: {sha256: " + conf::sha256Hex(key) + "}\n");

    const std::vector<conf::AuthKey> loaded = conf::loadKeysFile(file);
    ASSERT_EQ(loaded.size(), 1u);
    EXPECT_EQ(loaded[0], (conf::AuthKey{"alice", conf::sha256Hex(key), false, 0, 0}));

    conf::AuthConfig auth;
    auth.keys = loaded;
    EXPECT_EQ(KeyStore(auth, {}).authenticate("Bearer " + key)->name, "alice");
}

TEST(KeysCli, AddWithFlagsAppendsAfterExistingEntries) {
    TempDir dir;
    // An existing file in both forms, without a final newline.
    const std::string file = dir.write("keys.yaml",
                                       "# team keys\n"
                                       "old: " +
                                           std::string(64, 'a') +
                                           "\n"
                                           "ci:\n"
                                           "  sha256: " +
                                           std::string(64, 'b') +
                                           "\n"
                                           "  trusted: true");
    const std::string key = keyOf(
        keys({"add", "bot@team", "--file=" + file, "--trusted", "--max-concurrent", "4", "--requests-per-min=60"}));
    const std::vector<conf::AuthKey> loaded = conf::loadKeysFile(file);
    ASSERT_EQ(loaded.size(), 3u);
    EXPECT_EQ(loaded[0].name, "old");
    EXPECT_EQ(loaded[1], (conf::AuthKey{"ci", std::string(64, 'b'), true, 0, 0}));
    EXPECT_EQ(loaded[2], (conf::AuthKey{"bot@team", conf::sha256Hex(key), true, 4, 60}));

    // Names YAML would misread are quoted.
    const std::string odd = keyOf(keys({"add", "@odd", "--file", file}));
    EXPECT_EQ(conf::loadKeysFile(file).back(), (conf::AuthKey{"@odd", conf::sha256Hex(odd), false, 0, 0}));

    // A scraper's key: only --metrics, written as `metrics: true`.
    const std::string scraper = keyOf(keys({"add", "prometheus", "--file", file, "--metrics"}));
    EXPECT_EQ(conf::loadKeysFile(file).back(),
              (conf::AuthKey{"prometheus", conf::sha256Hex(scraper), false, 0, 0, true}));
    EXPECT_EQ(keys({"add", "x", "--file", file, "--metrics=true"}).exit_code, 2);
}

TEST(KeysCli, AddRefusesADuplicateNameAndLeavesTheFileAlone) {
    TempDir dir;
    const std::string file = dir.path() + "/keys.yaml";
    keyOf(keys({"add", "alice", "--file", file}));
    const std::string before = readFile(file);
    const CliRun again = keys({"add", "alice", "--file", file});
    EXPECT_EQ(again.exit_code, 1);
    EXPECT_EQ(again.out, "");  // no key printed for nothing
    EXPECT_NE(again.err.find("key \"alice\" already exists in " + file), std::string::npos) << again.err;
    EXPECT_EQ(readFile(file), before);
}

TEST(KeysCli, AddRefusesABrokenFileAndBadArguments) {
    TempDir dir;
    const std::string broken = dir.write("broken.yaml", "bob: 1234\n");
    const CliRun run = keys({"add", "alice", "--file", broken});
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_NE(run.err.find("bob: line 1: expected 64 hex digits"), std::string::npos) << run.err;
    EXPECT_EQ(readFile(broken), "bob: 1234\n");

    const std::string file = dir.path() + "/keys.yaml";
    EXPECT_EQ(keys({"add", "bad name", "--file", file}).exit_code, 2);
    EXPECT_EQ(keys({"add", "a:b", "--file", file}).exit_code, 2);
    EXPECT_EQ(keys({"add", std::string(65, 'x'), "--file", file}).exit_code, 2);
    EXPECT_EQ(keys({"add", "alice"}).exit_code, 2);
    EXPECT_EQ(keys({"add", "--file", file}).exit_code, 2);
    EXPECT_EQ(keys({"add", "alice", "bob", "--file", file}).exit_code, 2);
    EXPECT_EQ(keys({"add", "alice", "--file", file, "--max-concurrent", "-1"}).exit_code, 2);
    EXPECT_EQ(keys({"add", "alice", "--file", file, "--max-concurrent"}).exit_code, 2);
    EXPECT_EQ(keys({"add", "alice", "--file", file, "--requests-per-min", "ten"}).exit_code, 2);
    EXPECT_EQ(keys({"add", "alice", "--file", file, "--bogus"}).exit_code, 2);
    EXPECT_EQ(keys({"frobnicate"}).exit_code, 2);
    EXPECT_EQ(keys({}).exit_code, 2);
    EXPECT_FALSE(std::filesystem::exists(file));  // nothing was created by a refusal
    const CliRun help = keys({"--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("dpgate keys add NAME --file F"), std::string::npos);
}

TEST(KeysCli, ListPrintsNamesAndFlagsNeverHashes) {
    TempDir dir;
    const std::string file = dir.path() + "/keys.yaml";
    keyOf(keys({"add", "alice", "--file", file}));
    keyOf(keys({"add", "ci", "--file", file, "--trusted", "--max-concurrent", "2", "--requests-per-min", "30"}));
    keyOf(keys({"add", "prometheus", "--file", file, "--metrics"}));
    const CliRun list = keys({"list", "--file", file});
    EXPECT_EQ(list.exit_code, 0) << list.err;
    EXPECT_EQ(list.out, "alice\nci trusted max_concurrent=2 requests_per_min=30\nprometheus metrics\n");

    const CliRun missing = keys({"list", "--file", dir.path() + "/absent.yaml"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("absent.yaml"), std::string::npos);
}

TEST(KeysCli, RemoveTakesOutOneEntryAndKeepsTheRest) {
    TempDir dir;
    const std::string hash_a(64, 'a'), hash_b(64, 'b'), hash_c(64, 'c');
    const std::string file = dir.write("keys.yaml",
                                       "# team keys\n"
                                       "alice: " +
                                           hash_a +
                                           "\n"
                                           "ci:\n"
                                           "  # the build farm\n"
                                           "  sha256: " +
                                           hash_b +
                                           "\n"
                                           "  trusted: true\n"
                                           "\n"
                                           "\"@carol\": {sha256: " +
                                           hash_c + "}\n");
    ASSERT_EQ(::chmod(file.c_str(), 0640), 0);

    CliRun run = keys({"remove", "ci", "--file", file});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(readFile(file),
              "# team keys\n"
              "alice: " +
                  hash_a +
                  "\n"
                  "\n"
                  "\"@carol\": {sha256: " +
                  hash_c + "}\n");
    struct stat info {};
    ASSERT_EQ(::stat(file.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0640u);  // permissions survive the rewrite

    run = keys({"remove", "@carol", "--file", file});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(conf::loadKeysFile(file), (std::vector<conf::AuthKey>{conf::AuthKey{"alice", hash_a, false, 0, 0}}));

    run = keys({"remove", "nobody", "--file", file});
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_NE(run.err.find("no key \"nobody\""), std::string::npos);

    EXPECT_EQ(keys({"remove", "alice", "--file", file}).exit_code, 0);
    EXPECT_TRUE(conf::loadKeysFile(file).empty());
    // No temporary files left behind.
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(KeysCli, AddListRemoveRoundTrip) {
    TempDir dir;
    const std::string file = dir.path() + "/keys.yaml";
    const std::string a = keyOf(keys({"add", "a", "--file", file}));
    const std::string b = keyOf(keys({"add", "b", "--file", file, "--trusted"}));
    EXPECT_NE(a, b);
    EXPECT_EQ(keys({"remove", "a", "--file", file}).exit_code, 0);
    EXPECT_EQ(keys({"list", "--file", file}).out, "b trusted\n");
    conf::AuthConfig auth;
    auth.keys = conf::loadKeysFile(file);
    const KeyStore store(auth, {});
    EXPECT_EQ(store.authenticate("Bearer " + a), std::nullopt);
    EXPECT_EQ(store.authenticate("Bearer " + b)->name, "b");
    // A removed name may be added again, with a new key.
    const std::string a2 = keyOf(keys({"add", "a", "--file", file}));
    EXPECT_NE(a2, a);
}

}  // namespace
}  // namespace dpgate::auth
