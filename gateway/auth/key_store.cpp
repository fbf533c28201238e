#include "gateway/auth/key_store.hpp"

#include "conf/sha256_hex.hpp"
#include "gateway/auth/verified_key_cache.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <atomic>
#include <fstream>
#include <sstream>

namespace dpgate::auth {

namespace {

using Digest = std::array<unsigned char, 32>;

Digest digestOf(std::string_view data) {
    // The algorithm is fetched once and each thread keeps one digest context:
    // OpenSSL 3's one-shot SHA256() looks the algorithm up and builds a
    // context on every call, which costs more than hashing a key.
    static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
    struct Context {
        EVP_MD_CTX* ctx = EVP_MD_CTX_new();
        ~Context() { EVP_MD_CTX_free(ctx); }
    };
    thread_local Context context;
    Digest digest;
    unsigned int size = 0;
    if (sha256 == nullptr || context.ctx == nullptr || EVP_DigestInit_ex2(context.ctx, sha256, nullptr) != 1 ||
        EVP_DigestUpdate(context.ctx, data.data(), data.size()) != 1 ||
        EVP_DigestFinal_ex(context.ctx, digest.data(), &size) != 1 || size != digest.size())
        SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest.data());
    return digest;
}

int hexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    return c - 'a' + 10;  // normalizeSha256Hex leaves only [0-9a-f]
}

Digest digestFromHex(const std::string& hex, const std::string& key_path) {
    const std::optional<std::string> normal = conf::normalizeSha256Hex(hex);
    if (!normal) throw conf::ConfigError(key_path, 0, "expected 64 hex digits (the SHA-256 of the key)");
    Digest digest;
    for (std::size_t i = 0; i < digest.size(); ++i)
        digest[i] = static_cast<unsigned char>(hexValue((*normal)[2 * i]) << 4 | hexValue((*normal)[2 * i + 1]));
    return digest;
}

bool isWhitespace(char c) { return c == ' ' || c == '\t'; }

bool equalsIgnoreCase(std::string_view a, std::string_view lower_b) {
    if (a.size() != lower_b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != lower_b[i]) return false;
    }
    return true;
}

std::string readTokenFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw conf::ConfigError("admin.token_file", 0, "cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    std::string token = text.str();
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    if (token.empty()) throw conf::ConfigError("admin.token_file", 0, path + " is empty");
    return token;
}

uint64_t nextGeneration() {
    static std::atomic<uint64_t> last{0};  // 0 is an empty cache's generation
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

// The thread's cache, emptied when it last served another store.
VerifiedKeyCache& verifiedKeys(uint64_t generation) {
    thread_local VerifiedKeyCache cache;
    if (cache.generation() != generation) cache.reset(generation);
    return cache;
}

}  // namespace

std::optional<std::string_view> bearerToken(std::string_view authorization) {
    while (!authorization.empty() && isWhitespace(authorization.front())) authorization.remove_prefix(1);
    while (!authorization.empty() && isWhitespace(authorization.back())) authorization.remove_suffix(1);
    constexpr std::string_view scheme = "bearer";
    if (authorization.size() <= scheme.size() || !equalsIgnoreCase(authorization.substr(0, scheme.size()), scheme))
        return std::nullopt;
    std::string_view rest = authorization.substr(scheme.size());
    if (!isWhitespace(rest.front())) return std::nullopt;  // "Bearerxyz"
    while (!rest.empty() && isWhitespace(rest.front())) rest.remove_prefix(1);
    if (rest.empty()) return std::nullopt;
    for (char c : rest) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte <= 0x20 || byte == 0x7f) return std::nullopt;
    }
    return rest;
}

KeyStore::KeyStore(const conf::AuthConfig& auth, const conf::AdminConfig& admin)
    : required_(auth.required), generation_(nextGeneration()) {
    entries_.reserve(auth.keys.size());
    for (const conf::AuthKey& key : auth.keys) {
        entries_.push_back(
            Entry{digestFromHex(key.sha256, "auth.keys." + key.name),
                  KeyInfo{key.name, key.sha256.substr(0, 12), key.trusted, key.max_concurrent, key.requests_per_min,
                          key.metrics, key.requests_per_day, key.tokens_per_min, key.tokens_per_day}});
    }
    if (!admin.token_sha256.empty()) {
        admin_digest_ = digestFromHex(admin.token_sha256, "admin.token");
    } else if (!admin.token_file.empty()) {
        admin_digest_ = digestOf(readTokenFile(admin.token_file));
    }
}

std::optional<KeyInfo> KeyStore::authenticate(std::string_view authorization) const {
    const std::optional<std::string_view> token = bearerToken(authorization);
    if (!token) return std::nullopt;
    VerifiedKeyCache& verified = verifiedKeys(generation_);
    if (const std::optional<std::size_t> index = verified.find(*token)) return entries_[*index].info;
    const Digest presented = digestOf(*token);
    // Visit every entry and pick the first match with masks rather than a
    // branch, so the work done does not depend on where (or whether) the
    // key is found.
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    std::size_t found = none;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        const std::size_t equal = CRYPTO_memcmp(presented.data(), entries_[i].digest.data(), presented.size()) == 0;
        const std::size_t first = found == none;
        const std::size_t mask = std::size_t{0} - (equal & first);
        found = (found & ~mask) | (i & mask);
    }
    if (found == none) return std::nullopt;
    verified.remember(*token, found);
    return entries_[found].info;
}

std::size_t KeyStore::verifiedOnThisThread() const { return verifiedKeys(generation_).size(); }

bool KeyStore::authenticateAdmin(std::string_view authorization) const {
    if (!admin_digest_) return false;
    const std::optional<std::string_view> token = bearerToken(authorization);
    if (!token) return false;
    const Digest presented = digestOf(*token);
    return CRYPTO_memcmp(presented.data(), admin_digest_->data(), presented.size()) == 0;
}

std::vector<std::string> KeyStore::keyNames() const {
    std::vector<std::string> names;
    names.reserve(entries_.size());
    for (const Entry& entry : entries_) names.push_back(entry.info.name);
    return names;
}

}  // namespace dpgate::auth
