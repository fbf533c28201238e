#include "gateway/auth/key_store.hpp"
#include "gateway/auth/verified_key_cache.hpp"

#include "conf/config.hpp"
#include "conf/sha256_hex.hpp"
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace dpgate::auth {
namespace {

using conf::test::TempDir;

conf::AuthConfig twoKeys() {
    conf::AuthConfig auth;
    auth.keys.push_back(conf::AuthKey{"alice", conf::sha256Hex("sk-alice"), false, 0, 0});
    auth.keys.push_back(conf::AuthKey{"ci-bot", conf::sha256Hex("sk-ci"), true, 4, 60});
    return auth;
}

TEST(BearerToken, AcceptsTheBearerSchemeInAnyCase) {
    EXPECT_EQ(bearerToken("Bearer abc"), "abc");
    EXPECT_EQ(bearerToken("bearer abc"), "abc");
    EXPECT_EQ(bearerToken("BEARER abc"), "abc");
    EXPECT_EQ(bearerToken("  Bearer   abc \t"), "abc");  // OWS around, 1*SP after the scheme
    EXPECT_EQ(bearerToken("Bearer\tabc"), "abc");
}

TEST(BearerToken, RefusesEverythingElse) {
    EXPECT_EQ(bearerToken(""), std::nullopt);
    EXPECT_EQ(bearerToken("   "), std::nullopt);
    EXPECT_EQ(bearerToken("Bearer"), std::nullopt);
    EXPECT_EQ(bearerToken("Bearer "), std::nullopt);
    EXPECT_EQ(bearerToken("Bearerabc"), std::nullopt);
    EXPECT_EQ(bearerToken("Basic YWxpY2U6cHc="), std::nullopt);
    EXPECT_EQ(bearerToken("abc"), std::nullopt);
    EXPECT_EQ(bearerToken("Bearer a b"), std::nullopt);
    EXPECT_EQ(bearerToken(std::string_view("Bearer a\0b", 10)), std::nullopt);
    EXPECT_EQ(bearerToken("Token abc"), std::nullopt);
}

TEST(KeyStore, RightKeyGivesItsNameAndLimits) {
    const KeyStore store(twoKeys(), conf::AdminConfig{});
    EXPECT_EQ(store.keyCount(), 2u);
    EXPECT_EQ(store.authenticate("Bearer sk-alice"),
              (KeyInfo{"alice", conf::sha256Hex("sk-alice").substr(0, 12), false, 0, 0}));
    EXPECT_EQ(store.authenticate("bearer sk-ci"),
              (KeyInfo{"ci-bot", conf::sha256Hex("sk-ci").substr(0, 12), true, 4, 60}));
}

TEST(KeyStore, OnlyAKeyThatSaysSoMayReadMetrics) {
    conf::AuthConfig auth = twoKeys();
    auth.keys.push_back(conf::AuthKey{"scraper", conf::sha256Hex("sk-scrape"), false, 0, 0, true});
    const KeyStore store(auth, conf::AdminConfig{});
    EXPECT_TRUE(store.authenticate("Bearer sk-scrape")->metrics);
    EXPECT_FALSE(store.authenticate("Bearer sk-ci")->metrics);
    EXPECT_FALSE(store.authenticate("Bearer sk-alice")->metrics);
}

TEST(KeyStore, WrongMissingOrMalformedKeyIsRefused) {
    const KeyStore store(twoKeys(), conf::AdminConfig{});
    EXPECT_EQ(store.authenticate("Bearer sk-alicE"), std::nullopt);
    EXPECT_EQ(store.authenticate("Bearer sk-alice2"), std::nullopt);
    EXPECT_EQ(store.authenticate(""), std::nullopt);
    EXPECT_EQ(store.authenticate("sk-alice"), std::nullopt);
    EXPECT_EQ(store.authenticate("Basic sk-alice"), std::nullopt);
    EXPECT_EQ(store.authenticate("Bearer sk-alice extra"), std::nullopt);
    // The hash itself is not a key.
    EXPECT_EQ(store.authenticate("Bearer " + conf::sha256Hex("sk-alice")), std::nullopt);
}

TEST(KeyStore, AVerifiedKeyIsRememberedAndAWrongOneNeverIs) {
    const KeyStore store(twoKeys(), conf::AdminConfig{});
    EXPECT_EQ(store.verifiedOnThisThread(), 0u);
    EXPECT_EQ(store.authenticate("Bearer sk-wrong"), std::nullopt);
    EXPECT_EQ(store.verifiedOnThisThread(), 0u);  // only keys that matched a hash
    ASSERT_TRUE(store.authenticate("Bearer sk-alice"));
    EXPECT_EQ(store.verifiedOnThisThread(), 1u);
    // From the cache now: the same answer, and neighbours of the cached key
    // still refused.
    EXPECT_EQ(store.authenticate("Bearer sk-alice")->name, "alice");
    EXPECT_EQ(store.authenticate("Bearer sk-alicE"), std::nullopt);
    EXPECT_EQ(store.authenticate("Bearer sk-alic"), std::nullopt);
    EXPECT_EQ(store.authenticate("Bearer sk-alice2"), std::nullopt);
    EXPECT_EQ(store.authenticate("Bearer sk-ci")->name, "ci-bot");
    EXPECT_EQ(store.authenticate("Bearer sk-alice")->name, "alice");
    EXPECT_EQ(store.verifiedOnThisThread(), 2u);
}

TEST(KeyStore, ManyVerifiedKeysStayWithinTheCacheBound) {
    // Appended, not `"sk-" + ...`: GCC 12's -Wrestrict false positive (bug 105329).
    const auto numbered = [](std::string prefix, int i) { return prefix.append(std::to_string(i)); };
    conf::AuthConfig auth;
    for (int i = 0; i < 40; ++i)
        auth.keys.push_back(conf::AuthKey{numbered("k", i), conf::sha256Hex(numbered("sk-", i)), false, 0, 0});
    const KeyStore store(auth, conf::AdminConfig{});
    for (int round = 0; round < 2; ++round)
        for (int i = 0; i < 40; ++i) EXPECT_EQ(store.authenticate(numbered("Bearer sk-", i))->name, numbered("k", i));
    EXPECT_EQ(store.verifiedOnThisThread(), VerifiedKeyCache::kDefaultCapacity);
}

TEST(KeyStore, AReloadedStoreForgetsTheKeysTheOldOneVerified) {
    // The new store is built in the old one's storage: a cache keyed by the
    // store's address would still accept the removed key.
    std::optional<KeyStore> store;
    store.emplace(twoKeys(), conf::AdminConfig{});
    ASSERT_TRUE(store->authenticate("Bearer sk-alice"));
    ASSERT_EQ(store->verifiedOnThisThread(), 1u);
    conf::AuthConfig without_alice;
    without_alice.keys.push_back(conf::AuthKey{"ci-bot", conf::sha256Hex("sk-ci"), true, 4, 60});
    store.reset();
    store.emplace(without_alice, conf::AdminConfig{});
    EXPECT_EQ(store->authenticate("Bearer sk-alice"), std::nullopt);
    EXPECT_EQ(store->verifiedOnThisThread(), 0u);
    // A key moved to another name answers with the new name.
    conf::AuthConfig renamed;
    renamed.keys.push_back(conf::AuthKey{"ci-renamed", conf::sha256Hex("sk-ci"), false, 0, 0});
    ASSERT_EQ(store->authenticate("Bearer sk-ci")->name, "ci-bot");
    store.reset();
    store.emplace(renamed, conf::AdminConfig{});
    EXPECT_EQ(store->authenticate("Bearer sk-ci")->name, "ci-renamed");
    EXPECT_FALSE(store->authenticate("Bearer sk-ci")->trusted);
}

TEST(KeyStore, UppercaseStoredHashStillMatches) {
    conf::AuthConfig auth;
    std::string upper = conf::sha256Hex("sk-x");
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    auth.keys.push_back(conf::AuthKey{"x", upper, false, 0, 0});
    EXPECT_EQ(KeyStore(auth, {}).authenticate("Bearer sk-x")->name, "x");
}

TEST(KeyStore, TwoNamesWithTheSameHashResolveToTheFirst) {
    conf::AuthConfig auth = twoKeys();
    auth.keys.push_back(conf::AuthKey{"alice-again", conf::sha256Hex("sk-alice"), true, 0, 0});
    EXPECT_EQ(KeyStore(auth, {}).authenticate("Bearer sk-alice")->name, "alice");
}

TEST(KeyStore, NoKeysRefusesEveryone) {
    const KeyStore store(conf::AuthConfig{}, conf::AdminConfig{});
    EXPECT_EQ(store.authenticate("Bearer anything"), std::nullopt);
    EXPECT_TRUE(store.required());
    conf::AuthConfig open;
    open.required = false;
    EXPECT_FALSE(KeyStore(open, {}).required());
}

TEST(KeyStore, BadStoredHashIsAConfigError) {
    conf::AuthConfig auth;
    auth.keys.push_back(conf::AuthKey{"bad", "1234", false, 0, 0});
    try {
        KeyStore store(auth, {});
        FAIL() << "no error";
    } catch (const conf::ConfigError& e) {
        EXPECT_STREQ(e.what(), "conf: auth.keys.bad: expected 64 hex digits (the SHA-256 of the key)");
    }
}

TEST(KeyStore, AdminTokenFromHash) {
    conf::AdminConfig admin;
    admin.token_sha256 = conf::sha256Hex("admin-secret");
    const KeyStore store(twoKeys(), admin);
    EXPECT_TRUE(store.hasAdminToken());
    EXPECT_TRUE(store.authenticateAdmin("Bearer admin-secret"));
    EXPECT_TRUE(store.authenticateAdmin("bearer   admin-secret"));
    EXPECT_FALSE(store.authenticateAdmin("Bearer admin-secreT"));
    EXPECT_FALSE(store.authenticateAdmin("admin-secret"));
    EXPECT_FALSE(store.authenticateAdmin(""));
    // A client key is not the admin token, and the admin token is not a client key.
    EXPECT_FALSE(store.authenticateAdmin("Bearer sk-alice"));
    EXPECT_EQ(store.authenticate("Bearer admin-secret"), std::nullopt);
}

TEST(KeyStore, AdminTokenFromFileWithoutTrailingNewline) {
    TempDir dir;
    conf::AdminConfig admin;
    admin.token_file = dir.write("admin.token", "file-secret\r\n");
    const KeyStore store(conf::AuthConfig{}, admin);
    EXPECT_TRUE(store.authenticateAdmin("Bearer file-secret"));
    EXPECT_FALSE(store.authenticateAdmin("Bearer file-secret\r\n"));
    EXPECT_FALSE(store.authenticateAdmin("Bearer file-secre"));

    // Read once, at construction: changing the file later changes nothing.
    dir.write("admin.token", "other\n");
    EXPECT_TRUE(store.authenticateAdmin("Bearer file-secret"));
    EXPECT_FALSE(store.authenticateAdmin("Bearer other"));
}

TEST(KeyStore, AdminTokenFileMissingOrEmptyIsAConfigError) {
    TempDir dir;
    conf::AdminConfig admin;
    admin.token_file = dir.path() + "/absent";
    EXPECT_THROW(KeyStore(conf::AuthConfig{}, admin), conf::ConfigError);
    admin.token_file = dir.write("empty", "\n");
    try {
        KeyStore store(conf::AuthConfig{}, admin);
        FAIL() << "no error";
    } catch (const conf::ConfigError& e) {
        EXPECT_EQ(std::string(e.what()), "conf: admin.token_file: " + admin.token_file + " is empty");
    }
}

TEST(KeyStore, NoAdminTokenMeansNoAdmin) {
    const KeyStore store(twoKeys(), conf::AdminConfig{});
    EXPECT_FALSE(store.hasAdminToken());
    EXPECT_FALSE(store.authenticateAdmin("Bearer "));
    EXPECT_FALSE(store.authenticateAdmin("Bearer sk-alice"));
    EXPECT_FALSE(store.authenticateAdmin(""));
}

// The demo config's key works out of the box.
TEST(KeyStore, DemoConfigKeyWorks) {
    const conf::Config config =
        conf::loadConfigFile(std::string(DPGATE_SOURCE_DIR) + "/conf/examples/local.yaml", {.check_files = false});
    const KeyStore store(config.auth, config.admin);
    const std::optional<KeyInfo> info = store.authenticate("Bearer sk-dpgate-local");
    ASSERT_TRUE(info);
    EXPECT_EQ(info->name, "local-demo");
    EXPECT_EQ(store.authenticate("Bearer sk-dpgate-locaL"), std::nullopt);
}

}  // namespace
}  // namespace dpgate::auth
