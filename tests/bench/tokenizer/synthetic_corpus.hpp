#pragma once
// Deterministic synthetic text for the tokenizer benchmarks: English prose,
// Chinese, source code and a mixed chat transcript, from a seeded
// generator (the same bytes on every machine).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dpgate::bench {

struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
    // Zipf-like rank in [0, n): small ranks much more frequent, like words.
    std::size_t zipf(std::size_t n) {
        const double u = static_cast<double>(next() >> 11) / 9007199254740992.0;
        return std::min(n - 1, static_cast<std::size_t>(std::pow(static_cast<double>(n), u)) - 1);
    }
};

void appendUtf8(std::string& out, std::uint32_t cp);
// n words: common English ones first, then made of syllables.
std::vector<std::string> makeLexicon(Rng& rng, std::size_t n);
std::string englishParagraph(Rng& rng, const std::vector<std::string>& lexicon);
std::string chineseParagraph(Rng& rng);
std::string codeBlock(Rng& rng, const std::vector<std::string>& lexicon);
std::string chatTurn(Rng& rng, const std::vector<std::string>& lexicon);
// `text` cut to at most `bytes`, on a UTF-8 character boundary.
std::string trimToCharBoundary(std::string text, std::size_t bytes);

// make() called until `bytes` are reached, cut to `bytes`.
template <typename Make>
std::string generate(std::size_t bytes, Make make) {
    std::string out;
    while (out.size() < bytes) out += make();
    return trimToCharBoundary(std::move(out), bytes);
}

}  // namespace dpgate::bench
