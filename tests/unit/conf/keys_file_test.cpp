#include "conf/keys_file.hpp"

#include "conf/config.hpp"
#include "conf/sha256_hex.hpp"
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

namespace dpgate::conf {
namespace {

using test::errorOf;
using test::TempDir;

const std::string hash_a(64, 'a');
const std::string hash_b(64, 'b');

std::string keysError(const std::string& text) {
    try {
        parseKeysText(text, "keys.yaml");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "no error";
}

TEST(KeysFile, ReadsShortAndLongForms) {
    const std::vector<AuthKey> keys = parseKeysText(
        "# made by dpgate keys add\n"
        "alice: " +
            hash_a +
            "\n"
            "ci-bot:\n"
            "  sha256: " +
            std::string(64, 'B') +
            "\n"
            "  trusted: true\n"
            "  max_concurrent: 4\n"
            "  requests_per_min: 60\n",
        "keys.yaml");
    ASSERT_EQ(keys.size(), 2u);
    EXPECT_EQ(keys[0], (AuthKey{"alice", hash_a, false, 0, 0}));
    EXPECT_EQ(keys[1], (AuthKey{"ci-bot", hash_b, true, 4, 60}));  // hex is stored lowercase
}

TEST(KeysFile, MetricsIsOffUnlessSaid) {
    const std::vector<AuthKey> keys =
        parseKeysText("scraper:\n  sha256: " + hash_a +
                          "\n  metrics: true\n"
                          "plain: " +
                          hash_b + "\nsaid-no: {sha256: " + std::string(64, 'c') + ", metrics: false}\n",
                      "keys.yaml");
    ASSERT_EQ(keys.size(), 3u);
    EXPECT_EQ(keys[0], (AuthKey{"scraper", hash_a, false, 0, 0, true}));
    EXPECT_FALSE(keys[1].metrics);
    EXPECT_FALSE(keys[2].metrics);
    EXPECT_EQ(keysError("alice:\n  sha256: " + hash_a + "\n  metrics: maybe\n"),
              "conf: keys.yaml: alice.metrics: line 3: expected true or false, got \"maybe\"");
}

TEST(KeysFile, EmptyFileHoldsNoKeys) {
    EXPECT_TRUE(parseKeysText("", "keys.yaml").empty());
    EXPECT_TRUE(parseKeysText("# nothing yet\n", "keys.yaml").empty());
}

TEST(KeysFile, ErrorsNameTheFileTheKeyAndTheLine) {
    EXPECT_EQ(keysError("alice: " + hash_a + "\nbob: 1234\n"),
              "conf: keys.yaml: bob: line 2: expected 64 hex digits (the SHA-256 of the key) or a mapping with sha256");
    EXPECT_EQ(keysError("alice:\n  trusted: true\n"), "conf: keys.yaml: alice: line 2: missing sha256");
    EXPECT_EQ(keysError("alice:\n  sha256: nope\n"),
              "conf: keys.yaml: alice.sha256: line 2: expected 64 hex digits (the SHA-256 of the key)");
    // A plain key is for demo configs only; the keys file holds hashes.
    EXPECT_EQ(keysError("alice:\n  key: sk-123\n"),
              "conf: keys.yaml: alice.key: line 2: unknown key; expected one of: sha256, trusted, max_concurrent, "
              "requests_per_min, requests_per_day, tokens_per_min, tokens_per_day, metrics");
    EXPECT_EQ(keysError("alice: " + hash_a + "\nalice: " + hash_b + "\n"),
              "conf: keys.yaml: alice: line 2: duplicate key (first at line 1)");
    EXPECT_EQ(keysError("\"a b\": " + hash_a + "\n"),
              "conf: keys.yaml: a b: line 1: key name must be 1-64 characters of [A-Za-z0-9._@-]");
    EXPECT_EQ(keysError("- " + hash_a + "\n"), "conf: keys.yaml: line 1: expected a mapping, got a sequence");
    EXPECT_EQ(keysError("alice: [\n"), "conf: keys.yaml: line 2: invalid YAML: end of sequence flow not found");
}

TEST(KeysFile, IsLoadedThroughTheConfigRelativeToIt) {
    TempDir dir;
    dir.write("keys.yaml", "alice: " + hash_a + "\nbob: {sha256: " + hash_b + ", max_concurrent: 2}\n");
    const Config config = loadConfigText(
        "auth:\n"
        "  keys_file: keys.yaml\n"
        "  keys:\n"
        "    - {name: demo, key: sk-demo}\n"
        "backends:\n"
        "  - {name: a, url: \"http://h:1\"}\n",
        dir.path(), {.check_files = true});
    EXPECT_EQ(config.auth.keys_file, dir.path() + "/keys.yaml");
    ASSERT_EQ(config.auth.keys.size(), 3u);
    // Inline keys first, then the file's, in file order.
    EXPECT_EQ(config.auth.keys[0], (AuthKey{"demo", sha256Hex("sk-demo"), false, 0, 0}));
    EXPECT_EQ(config.auth.keys[1], (AuthKey{"alice", hash_a, false, 0, 0}));
    EXPECT_EQ(config.auth.keys[2], (AuthKey{"bob", hash_b, false, 2, 0}));
}

TEST(KeysFile, ErrorsInsideItNameItsPath) {
    TempDir dir;
    const std::string path = dir.write("keys.yaml", "alice: " + hash_a + "\nbob: short\n");
    EXPECT_EQ(
        errorOf("auth:\n  keys_file: keys.yaml\nbackends:\n  - {name: a, url: \"http://h:1\"}\n", dir.path(),
                {.check_files = true}),
        "conf: " + path + ": bob: line 2: expected 64 hex digits (the SHA-256 of the key) or a mapping with sha256");
    EXPECT_THROW(loadKeysFile(path), ConfigError);
}

TEST(KeysFile, NamesAndHashesAreUniqueAcrossInlineKeysAndTheFile) {
    TempDir dir;
    dir.write("keys.yaml", "alice: " + hash_a + "\n");
    const std::string tail = "backends:\n  - {name: a, url: \"http://h:1\"}\n";
    EXPECT_EQ(errorOf("auth:\n  keys_file: keys.yaml\n  keys:\n    - {name: alice, sha256: " + hash_b + "}\n" + tail,
                      dir.path(), {.check_files = true}),
              "conf: auth.keys_file: line 2: key name \"alice\" is defined twice (auth.keys or the keys file)");
    EXPECT_EQ(errorOf("auth:\n  keys_file: keys.yaml\n  keys:\n    - {name: bob, sha256: " + hash_a + "}\n" + tail,
                      dir.path(), {.check_files = true}),
              "conf: auth.keys_file: line 2: keys \"bob\" and \"alice\" have the same hash");
}

TEST(KeysFile, LoadKeysFileRefusesWhatIsNotARegularFile) {
    try {
        loadKeysFile("/dev/zero");
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_STREQ(e.what(), "conf: not a regular file: /dev/zero");
    }
    try {
        loadKeysFile("/nonexistent/keys.yaml");
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_STREQ(e.what(), "conf: file not found: /nonexistent/keys.yaml");
    }
}

TEST(Sha256Hex, MatchesKnownVectors) {
    EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(normalizeSha256Hex(std::string(64, 'F')), std::string(64, 'f'));
    EXPECT_EQ(normalizeSha256Hex(std::string(63, 'a')), std::nullopt);
    EXPECT_EQ(normalizeSha256Hex(std::string(63, 'a') + "g"), std::nullopt);
}

}  // namespace
}  // namespace dpgate::conf
