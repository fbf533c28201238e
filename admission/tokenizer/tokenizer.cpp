#include "admission/tokenizer/tokenizer.hpp"

#include <simdjson.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <stdexcept>

#include "admission/tokenizer/deepseek_v3_splitter.hpp"
#include "admission/tokenizer/fast_hash.hpp"
#include "admission/tokenizer/word_cache.hpp"

namespace dpgate::admission {

namespace {

struct LoadError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves,
// the others are shifted to U+0100 and up, in byte order.
std::string byteLevelChar(unsigned byte) {
    const bool printable =
        (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
    std::uint32_t cp = byte;
    if (!printable) {
        unsigned shifted = 0;
        for (unsigned b = 0; b < byte; ++b) {
            const bool p = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
            if (!p) ++shifted;
        }
        cp = 0x100 + shifted;
    }
    std::string out;
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else {
        out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
    return out;
}

bool isNullOrFalse(const nlohmann::json& j, const char* key) {
    return !j.contains(key) || j[key].is_null() || (j[key].is_boolean() && !j[key].get<bool>());
}

void checkNormalizer(const nlohmann::json& n) {
    if (n.is_null()) return;
    const std::string type = n.value("type", "");
    if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array() && n["normalizers"].empty())
        return;
    throw LoadError("unsupported normalizer: " + (type.empty() ? n.dump() : type) +
                    " (only none or an empty Sequence is implemented)");
}

void checkPreTokenizer(const nlohmann::json& p) {
    if (p.is_null()) throw LoadError("unsupported pre_tokenizer: null (expected the DeepSeek V3 Split sequence)");
    const std::string type = p.value("type", "");
    if (type != "Sequence") throw LoadError("unsupported pre_tokenizer: " + type + " (expected Sequence)");
    const auto& steps = p.at("pretokenizers");
    if (!steps.is_array() || steps.size() != kDeepSeekV3SplitPatterns.size() + 1) {
        throw LoadError("unsupported pre_tokenizer: Sequence of " + std::to_string(steps.size()) +
                        " steps (expected the 3 DeepSeek V3 Split regexes and ByteLevel)");
    }
    for (std::size_t i = 0; i < kDeepSeekV3SplitPatterns.size(); ++i) {
        const auto& step = steps[i];
        const std::string step_type = step.value("type", "");
        if (step_type != "Split")
            throw LoadError("unsupported pre_tokenizer step " + std::to_string(i) + ": " + step_type);
        if (!step.contains("pattern") || !step["pattern"].contains("Regex")) {
            throw LoadError("unsupported pre_tokenizer Split " + std::to_string(i) + ": pattern is not a Regex");
        }
        const std::string regex = step["pattern"]["Regex"].get<std::string>();
        if (regex != kDeepSeekV3SplitPatterns[i]) {
            throw LoadError("unsupported pre_tokenizer Split regex " + std::to_string(i) + ": " + regex +
                            " (only the DeepSeek V3 patterns are implemented)");
        }
        if (step.value("behavior", "") != "Isolated") {
            throw LoadError("unsupported pre_tokenizer Split behavior: " + step.value("behavior", "?"));
        }
        if (!isNullOrFalse(step, "invert")) throw LoadError("unsupported pre_tokenizer Split invert: true");
    }
    const auto& last = steps.back();
    if (last.value("type", "") != "ByteLevel") {
        throw LoadError("unsupported pre_tokenizer last step: " + last.value("type", "?") + " (expected ByteLevel)");
    }
    if (!isNullOrFalse(last, "add_prefix_space")) throw LoadError("unsupported ByteLevel add_prefix_space: true");
    if (!isNullOrFalse(last, "use_regex")) throw LoadError("unsupported ByteLevel use_regex: true");
}

void checkPostProcessor(const nlohmann::json& p) {
    if (p.is_null()) return;
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") return;  // only rewrites offsets
    throw LoadError("unsupported post_processor: " + type);
}

void checkModelScalar(std::string_view key, const nlohmann::json& v) {
    if (key == "type") {
        if (v != "BPE") throw LoadError("unsupported model: " + v.dump() + " (only BPE is implemented)");
    } else if (key == "dropout") {
        if (!v.is_null()) throw LoadError("unsupported BPE dropout: " + v.dump());
    } else if (key == "continuing_subword_prefix" || key == "end_of_word_suffix") {
        if (!v.is_null() && v != "") throw LoadError("unsupported BPE " + std::string(key) + ": " + v.dump());
    } else if (key == "byte_fallback" || key == "ignore_merges") {
        if (!v.is_null() && v != false) throw LoadError("unsupported BPE " + std::string(key) + ": true");
    } else if (key == "unk_token" || key == "fuse_unk") {
        // Unused: every byte has a byte-level token (checked below).
    } else {
        throw LoadError("unsupported BPE field: " + std::string(key));
    }
}

// Token -> id during load, open addressing (std::unordered_map's node chasing
// would be a quarter of the load time: three lookups per merge). Keys view the
// parser's string buffer, which outlives the load.
class Vocab {
public:
    // Sized up front: growing a 128K-entry table costs page faults twice.
    void reserve(std::size_t entries) {
        std::size_t capacity = 1024;
        while (capacity < entries * 2) capacity <<= 1;
        if (capacity > slots_.size()) rehash(capacity);
    }
    // Entries in order (a repeated token keeps its last id).
    void emplaceAll(const std::vector<std::pair<std::string_view, std::uint32_t>>& entries) {
        // Never more than half full.
        reserve(size_ + entries.size());
        for (const auto& [token, id] : entries) place(token, id, hash64(token));
    }
    const std::uint32_t* find(std::string_view token) const {
        if (slots_.empty()) return nullptr;
        for (std::size_t i = hash64(token) & mask_;; i = (i + 1) & mask_) {
            const Slot& slot = slots_[i];
            if (slot.data == nullptr) return nullptr;
            if (slot.size == token.size() && std::memcmp(slot.data, token.data(), token.size()) == 0) return &slot.id;
        }
    }
    bool contains(std::string_view token) const { return find(token) != nullptr; }
    std::size_t size() const { return size_; }
    template <typename Fn>
    void forEach(Fn&& fn) const {
        for (const Slot& slot : slots_) {
            if (slot.data != nullptr) fn(std::string_view(slot.data, slot.size), slot.id);
        }
    }

private:
    struct Slot {  // 16 bytes: the table is touched once per merge side
        const char* data = nullptr;
        std::uint32_t size = 0;
        std::uint32_t id = 0;
    };
    void place(std::string_view token, std::uint32_t id, std::uint64_t hash) {
        // An empty token still needs a non-null data pointer to mark the slot used.
        static const char kEmpty = 0;
        const char* data = token.empty() ? &kEmpty : token.data();
        for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
            Slot& slot = slots_[i];
            if (slot.data == nullptr) {
                slot = Slot{data, static_cast<std::uint32_t>(token.size()), id};
                ++size_;
                return;
            }
            if (slot.size == token.size() && std::memcmp(slot.data, token.data(), token.size()) == 0) {
                slot.id = id;  // a repeated key keeps the last value, as a JSON map does
                return;
            }
        }
    }
    void rehash(std::size_t capacity) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(capacity, Slot{});
        mask_ = capacity - 1;
        size_ = 0;
        for (const Slot& slot : old) {
            if (slot.data != nullptr) {
                const std::string_view token(slot.data, slot.size);
                place(token, slot.id, hash64(token));
            }
        }
    }
    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    std::size_t size_ = 0;
};

struct MergeText {
    std::string_view left;  // views of the parser's string buffer, like the vocab's keys
    std::string_view right;
};

struct ModelParts {
    std::size_t vocab_hint = 0;  // the expected entries, from the file's size
    Vocab vocab;
    bool have_vocab = false;
    std::vector<MergeText> merge_texts;  // in rank order, resolved to ids once the vocab is read
    std::vector<BpeModel::Merge> merges;
    bool have_merges = false;
};

std::uint32_t vocabId(const Vocab& vocab, std::string_view token, const char* what) {
    const std::uint32_t* id = vocab.find(token);
    if (id == nullptr) throw LoadError(std::string("BPE merge ") + what + " not in vocab: " + std::string(token));
    return *id;
}

// Three vocab lookups per merge: its left side, its right side and the two
// joined. The joined texts are made first, into one buffer.
void resolveMerges(ModelParts& parts) {
    const std::vector<MergeText>& texts = parts.merge_texts;
    std::size_t joined_bytes = 0;
    for (const MergeText& t : texts) joined_bytes += t.left.size() + t.right.size();
    std::string joined;
    joined.reserve(joined_bytes);
    std::vector<std::uint32_t> joined_start(texts.size() + 1);
    for (std::size_t i = 0; i < texts.size(); ++i) {
        joined_start[i] = static_cast<std::uint32_t>(joined.size());
        joined.append(texts[i].left).append(texts[i].right);
    }
    joined_start[texts.size()] = static_cast<std::uint32_t>(joined.size());
    parts.merges.reserve(parts.merges.size() + texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
        const std::string_view merged =
            std::string_view(joined).substr(joined_start[i], joined_start[i + 1] - joined_start[i]);
        parts.merges.push_back({vocabId(parts.vocab, texts[i].left, "left side"),
                                vocabId(parts.vocab, texts[i].right, "right side"),
                                vocabId(parts.vocab, merged, "result")});
    }
}

void readModel(simdjson::ondemand::object model, ModelParts& parts) {
    for (auto field : model) {
        const std::string_view key = field.unescaped_key();
        simdjson::ondemand::value value = field.value();
        if (key == "vocab") {
            std::vector<std::pair<std::string_view, std::uint32_t>> entries;
            entries.reserve(parts.vocab_hint);
            for (auto entry : value.get_object()) {
                const std::string_view token = entry.unescaped_key();
                const std::uint64_t id = entry.value().get_uint64();
                if (id > 0xffffffffull) throw LoadError("vocab id out of range: " + std::to_string(id));
                entries.emplace_back(token, static_cast<std::uint32_t>(id));
            }
            parts.vocab.emplaceAll(entries);
            parts.have_vocab = true;
        } else if (key == "merges") {
            for (auto item : value.get_array()) {
                if (item.type() == simdjson::ondemand::json_type::string) {
                    const std::string_view line = item.get_string();
                    const std::size_t space = line.find(' ');
                    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
                        throw LoadError("BPE merge is not \"a b\": " + std::string(line));
                    }
                    parts.merge_texts.push_back({line.substr(0, space), line.substr(space + 1)});
                } else {
                    std::string_view pair[2];
                    std::size_t sides = 0;
                    for (auto side : item.get_array()) {
                        const std::string_view text = side.get_string();
                        if (sides < 2) pair[sides] = text;
                        ++sides;
                    }
                    if (sides != 2) throw LoadError("BPE merge pair does not have 2 entries");
                    parts.merge_texts.push_back({pair[0], pair[1]});
                }
            }
            parts.have_merges = true;
        } else {
            checkModelScalar(key, nlohmann::json::parse(std::string_view(simdjson::to_json_string(value))));
        }
    }
    if (parts.have_vocab) resolveMerges(parts);
}

std::vector<AddedToken> readAddedTokens(const nlohmann::json& list) {
    std::vector<AddedToken> out;
    for (const auto& t : list) {
        for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
            if (!isNullOrFalse(t, flag)) {
                throw LoadError("unsupported added token flag " + std::string(flag) + "=true on " +
                                t.value("content", "?"));
            }
        }
        AddedToken token;
        token.content = t.at("content").get<std::string>();
        token.id = t.at("id").get<std::uint32_t>();
        token.normalized = t.value("normalized", false);
        token.special = t.value("special", false);
        out.push_back(std::move(token));
    }
    return out;
}

TokenizerLoad build(const simdjson::padded_string& json) {
    try {
        simdjson::ondemand::parser parser;
        simdjson::ondemand::document doc = parser.iterate(json);
        ModelParts parts;
        // tokenizer.json spends about 64 bytes per vocab entry (with its merge).
        parts.vocab_hint = json.size() / 64;
        bool have_model = false;
        bool have_pre_tokenizer = false;
        std::vector<AddedToken> added;
        for (auto field : doc.get_object()) {
            const std::string_view key = field.unescaped_key();
            simdjson::ondemand::value value = field.value();
            if (key == "model") {
                readModel(value.get_object(), parts);
                have_model = true;
                continue;
            }
            const auto parsed = nlohmann::json::parse(std::string_view(simdjson::to_json_string(value)));
            if (key == "version") {
            } else if (key == "truncation" || key == "padding") {
                if (!parsed.is_null()) throw LoadError("unsupported " + std::string(key) + ": must be null");
            } else if (key == "added_tokens") {
                added = readAddedTokens(parsed);
            } else if (key == "normalizer") {
                checkNormalizer(parsed);
            } else if (key == "pre_tokenizer") {
                checkPreTokenizer(parsed);
                have_pre_tokenizer = true;
            } else if (key == "post_processor") {
                checkPostProcessor(parsed);
            } else if (key == "decoder") {
                // Decoding is never needed to count.
            } else {
                throw LoadError("unsupported tokenizer.json field: " + std::string(key));
            }
        }
        if (!have_model || !parts.have_vocab || !parts.have_merges)
            throw LoadError("model with vocab and merges missing");
        if (!have_pre_tokenizer)
            throw LoadError("unsupported pre_tokenizer: absent (expected the DeepSeek V3 Split sequence)");
        std::uint32_t byte_ids[256];
        for (unsigned b = 0; b < 256; ++b) {
            const std::uint32_t* id = parts.vocab.find(byteLevelChar(b));
            if (id == nullptr) throw LoadError("byte-level vocab lacks the token for byte " + std::to_string(b));
            byte_ids[b] = *id;
        }
        std::size_t vocab_size = parts.vocab.size();
        for (const AddedToken& t : added) {
            if (!parts.vocab.contains(t.content)) ++vocab_size;
        }
        if (parts.merges.size() >= (1u << BpeModel::kIdBits) - 1)
            throw LoadError("more than 2^21 merges are not supported");
        parts.vocab.forEach([](std::string_view, std::uint32_t id) {
            if (id >= (1u << BpeModel::kIdBits))
                throw LoadError("vocab id 2^21 or above is not supported: " + std::to_string(id));
        });
        BpeModel model(byte_ids, parts.merges);
        return {std::make_shared<const Tokenizer>(std::move(model), AddedTokens(added), vocab_size), {}};
    } catch (const LoadError& e) {
        return {nullptr, std::string("tokenizer.json: ") + e.what()};
    } catch (const simdjson::simdjson_error& e) {
        return {nullptr, std::string("tokenizer.json: invalid JSON: ") + e.what()};
    } catch (const nlohmann::json::exception& e) {
        return {nullptr, std::string("tokenizer.json: unexpected shape: ") + e.what()};
    }
}

}  // namespace

TokenizerLoad Tokenizer::load(const std::filesystem::path& path) {
    std::filesystem::path file = path;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) file = path / "tokenizer.json";
    simdjson::padded_string json;
    if (simdjson::padded_string::load(file.string()).get(json) != simdjson::SUCCESS) {
        return {nullptr, "cannot read tokenizer file " + file.string()};
    }
    TokenizerLoad result = build(json);
    if (!result.tokenizer) result.error = file.string() + ": " + result.error;
    return result;
}

TokenizerLoad Tokenizer::fromJson(std::string_view json) { return build(simdjson::padded_string(json)); }

namespace {
// Four CJK characters: longer pieces led by a CJK lead byte bypass the word cache.
constexpr std::size_t kCjkCachedBytesMax = 12;
// Pieces split at a time: ~20 KB of prose, their ends in L1, however long the text.
constexpr std::size_t kPiecesPerBatch = 4096;
}  // namespace

void Tokenizer::releaseScratch() { BpeModel::releaseScratch(); }

std::size_t Tokenizer::scratchBytes() { return BpeModel::scratchBytes(); }

template <typename OnPiece>
void Tokenizer::forEachPiece(std::string_view text, WordCache* cache, BpeModel::LongMerge long_merge,
                             BpeModel::ShortMerge short_merge, OnPiece&& on_piece) const {
    // The start of a batch's first piece, then the end of each of its pieces.
    // Bounded (next() appends at most 64 beyond the batch), so never grown.
    thread_local std::vector<std::uint32_t> bounds;
    if (bounds.capacity() == 0) bounds.reserve(kPiecesPerBatch + 128);
    bounds.assign(1, 0);
    DeepSeekV3Splitter splitter(text);
    // A CJK clause longer than a few characters is one piece that almost
    // never repeats: looking it up and storing it costs more than its BPE
    // (which the per-character shortcut keeps short), so it skips the cache.
    auto cached = [&](std::string_view piece) {
        return piece.size() <= WordCache::kMaxPieceBytes &&
               !(piece.size() > kCjkCachedBytesMax && static_cast<unsigned char>(piece[0]) - 0xe3u <= 0xe9u - 0xe3u);
    };
    while (splitter.next(bounds, kPiecesPerBatch)) {
        const std::uint32_t* const at = bounds.data();
        const std::size_t count = bounds.size() - 1;
        auto pieceAt = [&](std::size_t k) { return text.substr(at[k], at[k + 1] - at[k]); };
        // Hashes computed kAhead pieces early, with the slot prefetched: on
        // text seen for the first time the lookups are cache misses, and
        // waiting for each in turn would be most of the word cache's cost
        // (measured with perf).
        constexpr std::size_t kAhead = 8;
        WordCache::Key keys[16];
        static_assert(std::size(keys) > kAhead);
        auto prepare = [&](std::size_t k) {
            const std::string_view piece = pieceAt(k);
            if (!cached(piece)) return;
            const std::size_t readable = text.size() - static_cast<std::size_t>(piece.data() - text.data());
            keys[k & 15] = WordCache::keyOf(piece, readable);
            cache->prefetch(keys[k & 15]);
        };
        if (cache != nullptr) {
            for (std::size_t k = 0; k < kAhead && k < count; ++k) prepare(k);
        }
        for (std::size_t k = 0; k < count; ++k) {
            const std::string_view piece = pieceAt(k);
            if (cache != nullptr && k + kAhead < count) prepare(k + kAhead);
            if (cache != nullptr && cached(piece)) {
                const WordCache::Key& key = keys[k & 15];
                std::uint32_t n = 0;
                if (const std::uint32_t* ids = cache->find(piece, key, n)) {
                    on_piece(ids, n);
                    continue;
                }
                const std::span<const std::uint32_t> ids = model_.mergePiece(piece, long_merge, short_merge);
                cache->insert(piece, key, ids.data(), static_cast<std::uint32_t>(ids.size()));
                on_piece(ids.data(), static_cast<std::uint32_t>(ids.size()));
            } else {
                const std::span<const std::uint32_t> ids = model_.mergePiece(piece, long_merge, short_merge);
                on_piece(ids.data(), static_cast<std::uint32_t>(ids.size()));
            }
        }
        bounds.assign(1, bounds.back());
    }
}

void Tokenizer::encodeOrdinary(std::string_view text, WordCache* cache, std::vector<std::uint32_t>& ids,
                               BpeModel::LongMerge long_merge, BpeModel::ShortMerge short_merge) const {
    forEachPiece(text, cache, long_merge, short_merge, [&](const std::uint32_t* piece_ids, std::uint32_t count) {
        ids.insert(ids.end(), piece_ids, piece_ids + count);
    });
}

std::uint64_t Tokenizer::countOrdinary(std::string_view text, WordCache* cache, BpeModel::LongMerge long_merge,
                                       BpeModel::ShortMerge short_merge) const {
    std::uint64_t total = 0;
    forEachPiece(text, cache, long_merge, short_merge,
                 [&](const std::uint32_t*, std::uint32_t count) { total += count; });
    return total;
}

}  // namespace dpgate::admission
