#pragma once
// The DeepSeek V3 pre-tokenizer, hand-written for speed. It implements exactly
// this Sequence of Split(Isolated) regexes (Oniguruma semantics), and nothing
// else; Tokenizer::load refuses a tokenizer.json whose patterns differ.
//   1. \p{N}{1,3}
//   2. [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+
//   3. [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
//      |[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//      | ?[\p{P}\p{S}]+[\r\n]*
//      |\s*[\r\n]+
//      |\s+(?!\S)
//      |\s+
// Each step splits every piece of the previous one; text no pattern matches
// stays as its own piece (Isolated keeps both matches and gaps).
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/fast_paths.hpp"

namespace dpgate::admission {

// The three Split regexes, byte for byte as they appear in tokenizer.json
// (after JSON unescaping). Used by load to check the file matches.
extern const std::array<std::string_view, 3> kDeepSeekV3SplitPatterns;

// The pieces of `text` (valid UTF-8, under 4 GiB) a batch at a time, so a
// long text needs no more memory than a short one. `fast_path` false: the
// plain way alone (deepseek_v3_splitter_fast_path.hpp says what it skips);
// the same pieces either way.
class DeepSeekV3Splitter {
public:
    explicit DeepSeekV3Splitter(std::string_view text,
                                bool fast_path = fastPathOn(FastPath::deepseek_v3_splitter_fast_path));
    // Appends the end offsets (bytes, relative to the text) of the next
    // pieces in order, `batch` of them or a few more (up to 64); false when
    // the text is done and nothing was appended.
    bool next(std::vector<std::uint32_t>& piece_ends, std::size_t batch);

    // Where a split left off: the next piece's start, where the 64-byte
    // windows may be tried next, and the end of the region being split when
    // it stopped inside one (found once: found again at every batch, a
    // megabytes-long region would cost its length per batch).
    struct State {
        std::uint32_t pos = 0;
        std::uint32_t window_from = 0;
        std::uint32_t region_end = 0;
    };

private:
    std::string_view text_;
    State state_;
    bool fast_path_;
};

// Appends the end offset of every piece of `text` in order, with the fast path.
void splitDeepSeekV3(std::string_view text, std::vector<std::uint32_t>& piece_ends);

// The same pieces the plain way (every piece found by regions and matchAt);
// the tests and the tokenizer fuzz target check that the two agree.
void splitDeepSeekV3ByRegions(std::string_view text, std::vector<std::uint32_t>& piece_ends);

}  // namespace dpgate::admission
