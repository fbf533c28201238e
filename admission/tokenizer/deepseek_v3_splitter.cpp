#include "admission/tokenizer/deepseek_v3_splitter.hpp"

#include "admission/tokenizer/deepseek_v3_split_classes.hpp"
#include "admission/tokenizer/deepseek_v3_splitter_fast_path.hpp"

namespace dpgate::admission {

const std::array<std::string_view, 3> kDeepSeekV3SplitPatterns = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

namespace {

using namespace splitter_detail;
using SplitState = DeepSeekV3Splitter::State;

// The plain way: the regex's alternatives tried in order at each piece
// start, as a backtracking engine tries them, every character classified
// through the Unicode table.
class RegionSplitter {
public:
    RegionSplitter(const unsigned char* base, std::uint32_t end) : s_(base), end_(end) {}

    std::uint32_t scan(std::uint32_t i, std::uint16_t mask) const {
        while (i < end_) {
            const Char c = charAt(s_ + i);
            if (!(c.flags & mask)) break;
            i += c.len;
        }
        return i;
    }

    // End of the step-3 match starting at i, or 0 when no alternative matches.
    std::uint32_t matchAt(std::uint32_t i) const {
        const Char c0 = charAt(s_ + i);
        const std::uint32_t e0 = i + c0.len;
        // [!"#...~][A-Za-z]+
        if (c0.flags & kAsciiPunct) {
            std::uint32_t j = e0;
            while (j < end_ && s_[j] < 0x80 && (kAscii.flags[s_[j]] & kAsciiLetter)) ++j;
            if (j > e0) return j;
        }
        // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
        if (!(c0.flags & (kCrLf | kL | kP | kS))) {
            const std::uint32_t j = scan(e0, kL | kM);
            if (j > e0) return j;
        }
        if (c0.flags & (kL | kM)) return scan(e0, kL | kM);
        // ' ?[\p{P}\p{S}]+[\r\n]*'
        if ((c0.flags & kSpaceChar) && e0 < end_) {
            const std::uint32_t j = scan(e0, kP | kS);
            if (j > e0) return scanCrLf(j);
        }
        if (c0.flags & (kP | kS)) return scanCrLf(scan(e0, kP | kS));
        if (c0.flags & kSpace) {
            // \s*[\r\n]+ ends after the run's last CR/LF; otherwise \s+(?!\S)
            // leaves the run's last character for the next word unless the run
            // ends the piece, and a lone character falls through to \s+.
            std::uint32_t j = i;
            std::uint32_t last_crlf_end = 0;
            std::uint32_t last_start = i;
            unsigned count = 0;
            while (j < end_) {
                const Char c = charAt(s_ + j);
                if (!(c.flags & kSpace)) break;
                if (c.flags & kCrLf) last_crlf_end = j + c.len;
                last_start = j;
                j += c.len;
                ++count;
            }
            if (last_crlf_end != 0) return last_crlf_end;
            if (j == end_ || count == 1) return j;
            return last_start;
        }
        return 0;
    }

    std::uint32_t scanCrLf(std::uint32_t j) const {
        while (j < end_ && (s_[j] == '\r' || s_[j] == '\n')) ++j;
        return j;
    }

    // Appends the pieces from `begin` (a piece start) to the region's end and
    // returns the end, or stops at a piece start once piece_ends holds
    // `limit` entries and returns that start: splitting again from there
    // gives the same pieces (matchAt looks at nothing before its start).
    std::uint32_t split(std::uint32_t begin, std::vector<std::uint32_t>& piece_ends, std::size_t limit) const {
        std::uint32_t i = begin;
        std::uint32_t gap_start = begin;
        while (i < end_) {
            if (gap_start == i && piece_ends.size() >= limit) return i;
            const std::uint32_t m = matchAt(i);
            if (m != 0) {
                if (gap_start < i) piece_ends.push_back(i);
                piece_ends.push_back(m);
                i = m;
                gap_start = m;
            } else {
                i += charAt(s_ + i).len;
            }
        }
        if (gap_start < end_) piece_ends.push_back(end_);
        return end_;
    }

private:
    const unsigned char* s_;
    std::uint32_t end_;
};

// Splits from state.pos until the text ends or piece_ends holds `limit`
// entries (then a few more may follow: a window's pieces, a match and the
// gap before it), leaving in `state` where to go on.
template <bool kFastPath>
void split(std::string_view text, SplitState& state, std::vector<std::uint32_t>& piece_ends, std::size_t limit) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const auto n = static_cast<std::uint32_t>(text.size());
    const bool ideograph_shortcut = kFastPath && ideographsAreOnlyLetters();
    std::uint32_t window_from = state.window_from;
    std::uint32_t pos = state.pos;
    while (pos < n && piece_ends.size() < limit) {
        if (pos < state.region_end) {  // a region the last call stopped inside
            pos = RegionSplitter(s, state.region_end).split(pos, piece_ends, limit);
            continue;
        }
        if (kFastPath && s[pos] < 0x80) {
            if (const std::uint32_t next = windowStep(s, n, pos, window_from, piece_ends); next != 0) {
                pos = next;
                continue;
            }
            if (const std::uint32_t end = asciiPieceEnd(s, pos, n); end != 0) {
                piece_ends.push_back(end);
                pos = end;
                continue;
            }
        }
        if (ideograph_shortcut) {
            if (const std::uint32_t run = ideographRun(s, pos, n); run != 0) {
                const std::uint32_t end = pos + run;
                if (end == n || !(charAt(s + end).flags & kCjk)) {
                    piece_ends.push_back(end);
                    pos = end;
                    continue;
                }
            }
        }
        Char c = charAt(s + pos);
        if (c.flags & kN) {
            // Step 1: runs of numbers, three at a time.
            unsigned taken = 0;
            while (pos < n && taken < 3) {
                c = charAt(s + pos);
                if (!(c.flags & kN)) break;
                pos += c.len;
                ++taken;
            }
            piece_ends.push_back(pos);
            continue;
        }
        // Steps 2 and 3: a region is a maximal run that is all CJK or all
        // non-CJK (and never a number); step 3 runs inside each region alone.
        const std::uint16_t cjk = c.flags & kCjk;
        std::uint32_t end = pos + c.len;
        while (end < n) {
            const Char d = charAt(s + end);
            if ((d.flags & kN) || (d.flags & kCjk) != cjk) break;
            end += d.len;
        }
        state.region_end = end;
        pos = RegionSplitter(s, end).split(pos, piece_ends, limit);
    }
    state.pos = pos;
    state.window_from = window_from;
}

}  // namespace

DeepSeekV3Splitter::DeepSeekV3Splitter(std::string_view text, bool fast_path) : text_(text), fast_path_(fast_path) {
    // Where windowPieces may be tried next: after it vouched for nothing, not
    // before the byte it could not classify; and not before a non-ASCII byte
    // in the next sixteen (ASCII between CJK or Cyrillic words), where it
    // would vouch for little.
    state_.window_from = kAscii.window_classes_agree ? 0 : static_cast<std::uint32_t>(text.size());
}

bool DeepSeekV3Splitter::next(std::vector<std::uint32_t>& piece_ends, std::size_t batch) {
    const std::size_t before = piece_ends.size();
    if (fast_path_) {
        split<true>(text_, state_, piece_ends, before + batch);
    } else {
        split<false>(text_, state_, piece_ends, before + batch);
    }
    return piece_ends.size() > before;
}

void splitDeepSeekV3(std::string_view text, std::vector<std::uint32_t>& piece_ends) {
    DeepSeekV3Splitter(text, true).next(piece_ends, static_cast<std::size_t>(-1) - piece_ends.size());
}

void splitDeepSeekV3ByRegions(std::string_view text, std::vector<std::uint32_t>& piece_ends) {
    DeepSeekV3Splitter(text, false).next(piece_ends, static_cast<std::size_t>(-1) - piece_ends.size());
}

}  // namespace dpgate::admission
