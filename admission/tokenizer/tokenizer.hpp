#pragma once
// A HuggingFace tokenizer.json of the byte-level BPE family, loaded for exact
// token counting. Supported, and checked at load (anything else is a load
// error naming the component):
//   - normalizer: absent, null, or an empty Sequence;
//   - pre_tokenizer: Sequence of the DeepSeek V3 Split regexes (Isolated)
//     followed by ByteLevel(add_prefix_space=false, use_regex=false);
//   - model: BPE with vocab and merges ("a b" or ["a","b"]), no dropout,
//     no prefix/suffix, no byte_fallback, no ignore_merges;
//   - added_tokens without single_word/lstrip/rstrip;
//   - post_processor: absent, null or ByteLevel (adds no ids); truncation and
//     padding null.
// Immutable after load: share one instance between threads.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/tokenizer/added_tokens.hpp"
#include "admission/tokenizer/bpe_model.hpp"

namespace dpgate::admission {

class WordCache;
class Tokenizer;

struct TokenizerLoad {
    std::shared_ptr<const Tokenizer> tokenizer;  // null on error
    std::string error;
};

class Tokenizer {
public:
    // `path` is a tokenizer.json file or a directory holding one.
    static TokenizerLoad load(const std::filesystem::path& path);
    static TokenizerLoad fromJson(std::string_view json);

    // Ordinary text (no added-token matching), valid UTF-8: pre-tokenize and
    // BPE each piece, appending ids. `cache` may be null. `long_merge` and
    // `short_merge` choose how long and short pieces merge (the same ids
    // whichever).
    void encodeOrdinary(std::string_view text, WordCache* cache, std::vector<std::uint32_t>& ids,
                        BpeModel::LongMerge long_merge = BpeModel::LongMerge::kAuto,
                        BpeModel::ShortMerge short_merge = BpeModel::ShortMerge::kLinear) const;
    std::uint64_t countOrdinary(std::string_view text, WordCache* cache,
                                BpeModel::LongMerge long_merge = BpeModel::LongMerge::kAuto,
                                BpeModel::ShortMerge short_merge = BpeModel::ShortMerge::kLinear) const;

    // Frees this thread's buffers beyond what ordinary text needs (see
    // BpeModel::releaseScratch); TokenCounter calls it after each text.
    static void releaseScratch();
    // Bytes this thread's buffers hold now.
    static std::size_t scratchBytes();

    const AddedTokens& addedTokens() const { return added_; }
    const BpeModel& model() const { return model_; }
    std::size_t vocabSize() const { return vocab_size_; }

    Tokenizer(BpeModel model, AddedTokens added, std::size_t vocab_size)
        : model_(std::move(model)), added_(std::move(added)), vocab_size_(vocab_size) {}

private:
    template <typename OnPiece>
    void forEachPiece(std::string_view text, WordCache* cache, BpeModel::LongMerge long_merge,
                      BpeModel::ShortMerge short_merge, OnPiece&& on_piece) const;

    BpeModel model_;
    AddedTokens added_;
    std::size_t vocab_size_;
};

}  // namespace dpgate::admission
