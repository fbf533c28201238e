// Feeds raw bytes to the tokenizer. Invariants checked on every input:
// invalid UTF-8 is refused by both count and encode; valid input counts to
// exactly the number of ids encode returns, with or without caches; the
// splitter's fast paths (ASCII pieces, 64-byte windows) give the pieces of
// its general path, and batches of any size the pieces of one split; the
// BPE rank sweep gives the heap merge's ids, on every piece and on the
// input as one piece (up to kPlainBytesMax). The corpus holds long runs (of one character,
// periodic, inside text) for the sweep. (Chat bodies and the template path
// are fuzz_admission's and fuzz_template's.)
//   fuzz_tokenizer tests/fuzz/tokenizer/corpus
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "admission/tokenizer/deepseek_v3_splitter.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace {

using namespace dpgate::admission;

std::shared_ptr<const Tokenizer> loadOnce() {
    std::filesystem::path dir = std::filesystem::path(DPGATE_SOURCE_DIR) / "local/tokenizer/deepseek-v3";
    if (const char* env = std::getenv("DPGATE_TOKENIZER_DIR")) dir = env;
    TokenizerLoad loaded = Tokenizer::load(dir);
    if (!loaded.tokenizer) {
        std::fprintf(stderr, "%s\n", loaded.error.c_str());
        std::abort();
    }
    return loaded.tokenizer;
}

// The heap merge, instrumented for coverage, takes seconds for a long run:
// it is compared on inputs (or the part of them) up to this size, and the
// unit tests compare it on megabytes.
constexpr std::size_t kPlainBytesMax = 32 << 10;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const auto tokenizer = loadOnce();
    static TokenCounter warm = [] {
        TokenCounter counter(tokenizer);
        counter.setRankSweep(true);  // whatever DPGATE_PLAIN says
        counter.setLinearMerge(true);
        return counter;
    }();
    static TokenCounter plain = [] {
        TokenCounter counter(tokenizer);
        counter.setRankSweep(false);
        counter.setLinearMerge(false);
        return counter;
    }();
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    TokenCounter cold(
        tokenizer,
        TokenCounterLimits{.word_cache_entries = 4, .segment_cache_entries = 2, .min_cached_segment_bytes = 1});
    const TokenCount a = warm.count(text);
    const TokenCount b = cold.count(text);
    std::vector<std::uint32_t> ids;
    const auto encode_error = warm.encode(text, ids);
    const bool valid = findInvalidUtf8(text) == kValidUtf8;
    // The UTF-8 check's fast path (utf8_ascii_runs.hpp) stops where the plain one does.
    if (findInvalidUtf8(text, true) != findInvalidUtf8(text, false)) std::abort();
    if (a.ok != valid || b.ok != valid || encode_error.has_value() == valid) std::abort();
    if (valid && (a.tokens != ids.size() || b.tokens != ids.size())) std::abort();
    if (valid && !text.empty() && ids.empty()) std::abort();
    if (valid) {
        std::vector<std::uint32_t> fast;
        std::vector<std::uint32_t> regions;
        splitDeepSeekV3(text, fast);
        splitDeepSeekV3ByRegions(text, regions);
        if (fast != regions) std::abort();
        for (const std::size_t batch : {1, 7}) {
            std::vector<std::uint32_t> batched;
            DeepSeekV3Splitter splitter(text);
            while (splitter.next(batched, batch)) {
            }
            if (batched != fast) std::abort();
        }
        if (text.size() <= kPlainBytesMax) {
            std::vector<std::uint32_t> heap_ids;
            if (plain.encode(text, heap_ids).has_value() || heap_ids != ids) std::abort();
        }
    }
    // BPE takes any bytes: the input as one piece, swept and by the heap.
    using LongMerge = BpeModel::LongMerge;
    const std::string_view piece = text.substr(0, kPlainBytesMax);
    std::vector<std::uint32_t> swept;
    std::vector<std::uint32_t> heap;
    tokenizer->model().encodePiece(piece, swept, LongMerge::kRankSweep);
    tokenizer->model().encodePiece(piece, heap, LongMerge::kHeap);
    if (swept != heap) std::abort();
    // Its first bytes, short enough for the linear scan, scanned and by the heap.
    using ShortMerge = BpeModel::ShortMerge;
    const std::string_view short_piece = text.substr(0, BpeModel::kLinearMergeMax);
    std::vector<std::uint32_t> scanned;
    std::vector<std::uint32_t> short_heap;
    tokenizer->model().encodePiece(short_piece, scanned, LongMerge::kHeap, ShortMerge::kLinear);
    tokenizer->model().encodePiece(short_piece, short_heap, LongMerge::kHeap, ShortMerge::kHeap);
    if (scanned != short_heap) std::abort();

    return 0;
}
