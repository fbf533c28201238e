#include "admission/template/jinja/py_text.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "admission/template/jinja/py_text_tables.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace dpgate::admission::jinja {

namespace tables = py_text_tables;

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr char32_t kCapitalSigma = 0x03A3;

// --- UTF-8 -------------------------------------------------------------------

bool isContinuation(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

// The code point starting at byte `pos`; `len` receives its byte length.
char32_t decodeAt(std::string_view text, std::size_t pos, unsigned& len) {
    return decodeUtf8(reinterpret_cast<const unsigned char*>(text.data()) + pos, len);
}

// The code point ending at byte `end`; `end` moves back to its first byte.
char32_t decodeBefore(std::string_view text, std::size_t& end) {
    std::size_t start = end - 1;
    while (isContinuation(text[start])) --start;
    unsigned len = 0;
    const char32_t c = decodeAt(text, start, len);
    end = start;
    return c;
}

void appendUtf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (c >> 12)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (c >> 18)));
        out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
}

// Byte offset of code point `index`, counting from byte `from`; the end of
// the text when there are fewer code points.
std::size_t byteOffsetOf(std::string_view text, std::int64_t index, std::size_t from = 0) {
    std::size_t pos = from;
    for (; index > 0 && pos < text.size(); --index) {
        ++pos;
        while (pos < text.size() && isContinuation(text[pos])) ++pos;
    }
    return pos;
}

// --- Tables ------------------------------------------------------------------

std::uint16_t flagsOf(char32_t c) {
    if (c < 256) return tables::kLatin1Flags[c];
    const tables::PropertyRange* begin = tables::kPropertyRanges;
    const tables::PropertyRange* end = begin + tables::kPropertyRangesCount;
    // The first range starts at 0, so the one before upper_bound exists.
    const auto* range =
        std::upper_bound(begin, end, c, [](char32_t v, const tables::PropertyRange& r) { return v < r.first; });
    return (range - 1)->flags;
}

bool has(char32_t c, std::uint16_t flag) { return (flagsOf(c) & flag) != 0; }

// Up to three code points: the longest full case mapping Unicode has.
struct Mapped {
    char32_t cps[3];
    unsigned size;
};

const tables::MultiCase* findMulti(const tables::MultiCase* table, std::size_t count, char32_t c) {
    const tables::MultiCase* end = table + count;
    const auto* entry =
        std::lower_bound(table, end, c, [](const tables::MultiCase& m, char32_t v) { return m.code_point < v; });
    return entry != end && entry->code_point == c ? entry : nullptr;
}

Mapped fromMulti(const tables::MultiCase& entry) {
    Mapped m{{entry.mapped[0], entry.mapped[1], entry.mapped[2]}, 0};
    while (m.size < 3 && m.cps[m.size] != 0) ++m.size;
    return m;
}

char32_t applyRuns(const tables::CaseRun* runs, std::size_t count, char32_t c) {
    const tables::CaseRun* end = runs + count;
    const auto* run = std::upper_bound(runs, end, c, [](char32_t v, const tables::CaseRun& r) { return v < r.first; });
    if (run == runs) return c;
    --run;
    if (c > run->last || (c - run->first) % static_cast<char32_t>(run->stride) != 0) return c;
    return static_cast<char32_t>(static_cast<std::int32_t>(c) + run->delta);
}

Mapped upperOf(char32_t c) {
    if (c < 0x80) return {{c >= 'a' && c <= 'z' ? c - 0x20 : c}, 1};
    if (const auto* multi = findMulti(tables::kUpperMulti, tables::kUpperMultiCount, c)) return fromMulti(*multi);
    return {{applyRuns(tables::kUpperRuns, tables::kUpperRunsCount, c)}, 1};
}

// Without context: U+03A3 gives the non-final sigma here.
Mapped lowerOf(char32_t c) {
    if (c < 0x80) return {{c >= 'A' && c <= 'Z' ? c + 0x20 : c}, 1};
    if (const auto* multi = findMulti(tables::kLowerMulti, tables::kLowerMultiCount, c)) return fromMulti(*multi);
    return {{applyRuns(tables::kLowerRuns, tables::kLowerRunsCount, c)}, 1};
}

Mapped titleOf(char32_t c) {
    if (c < 0x80) return upperOf(c);
    if (const auto* override_ = findMulti(tables::kTitleOverrides, tables::kTitleOverridesCount, c)) {
        return fromMulti(*override_);
    }
    return upperOf(c);
}

// CPython's handle_capital_sigma: final when, skipping case-ignorable code
// points, a cased one comes before and no cased one comes after. Each scan
// stops at the first other code point, so a whole lower() stays linear:
// a run of case-ignorables is crossed at most once from each side.
bool isFinalSigma(std::string_view text, std::size_t sigma_begin, std::size_t sigma_end) {
    std::size_t pos = sigma_begin;
    char32_t before = 0;
    bool found = false;
    while (pos > 0) {
        before = decodeBefore(text, pos);
        if (!has(before, tables::kCaseIgnorable)) {
            found = true;
            break;
        }
    }
    if (!found || !has(before, tables::kCased)) return false;
    pos = sigma_end;
    while (pos < text.size()) {
        unsigned len = 0;
        const char32_t after = decodeAt(text, pos, len);
        pos += len;
        if (!has(after, tables::kCaseIgnorable)) return !has(after, tables::kCased);
    }
    return true;
}

// The lowercase of the code point at [begin, begin + len), in context.
Mapped lowerAt(std::string_view text, std::size_t begin, unsigned len, char32_t c) {
    if (c == kCapitalSigma) return {{isFinalSigma(text, begin, begin + len) ? char32_t{0x03C2} : char32_t{0x03C3}}, 1};
    return lowerOf(c);
}

void append(std::string& out, const Mapped& m) {
    for (unsigned i = 0; i < m.size; ++i) appendUtf8(out, m.cps[i]);
}

// Calls map(code point, byte offset, byte length) -> Mapped for each code
// point and concatenates the results.
template <typename Map>
std::string mapEach(std::string_view text, Map map) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t pos = 0; pos < text.size();) {
        unsigned len = 0;
        const char32_t c = decodeAt(text, pos, len);
        append(out, map(c, pos, len));
        pos += len;
    }
    return out;
}

// True when every code point satisfies pred; false for "".
template <typename Pred>
bool allOf(std::string_view text, Pred pred) {
    if (text.empty()) return false;
    for (std::size_t pos = 0; pos < text.size();) {
        unsigned len = 0;
        if (!pred(decodeAt(text, pos, len))) return false;
        pos += len;
    }
    return true;
}

// --- Byte search ---------------------------------------------------------------

// Valid UTF-8 never matches inside a code point, so byte offsets found here
// are code-point boundaries. Short needles use string_view's search, which
// costs up to the needle's length per haystack byte; long ones use
// Knuth-Morris-Pratt, linear whatever the bytes, because both sides can be
// request text: string_view::find and boyer_moore_horspool_searcher take
// O(haystack * needle) on repetitive text, and libstdc++'s
// boyer_moore_searcher builds its shift table in O(needle^2).
class Finder {
public:
    explicit Finder(std::string_view needle, bool backward) : needle_(needle), backward_(backward) {
        if (needle_.size() >= kLongNeedle) buildFailure();
    }

    // The first match starting at or after `from`.
    std::size_t find(std::string_view hay, std::size_t from) const {
        if (failure_.empty()) return hay.find(needle_, from);
        std::size_t k = 0;
        for (std::size_t i = from; i < hay.size(); ++i) {
            k = step(k, hay[i]);
            if (k == needle_.size()) return i + 1 - k;
        }
        return std::string_view::npos;
    }

    // The last match ending at or before `end`.
    std::size_t rfind(std::string_view hay, std::size_t end) const {
        if (end < needle_.size()) return std::string_view::npos;
        if (failure_.empty()) return hay.rfind(needle_, end - needle_.size());
        std::size_t k = 0;
        for (std::size_t i = end; i > 0; --i) {
            k = step(k, hay[i - 1]);
            if (k == needle_.size()) return i - 1;
        }
        return std::string_view::npos;
    }

private:
    static constexpr std::size_t kLongNeedle = 32;

    // Pattern byte i in scan order (reversed for backward search).
    char at(std::size_t i) const { return backward_ ? needle_[needle_.size() - 1 - i] : needle_[i]; }

    // Matched-prefix length after reading `byte` with k bytes matched.
    std::size_t step(std::size_t k, char byte) const {
        while (k > 0 && at(k) != byte) k = failure_[k - 1];
        return at(k) == byte ? k + 1 : 0;
    }

    void buildFailure() {
        failure_.assign(needle_.size(), 0);
        std::size_t k = 0;
        for (std::size_t i = 1; i < needle_.size(); ++i) {
            while (k > 0 && at(i) != at(k)) k = failure_[k - 1];
            if (at(i) == at(k)) ++k;
            failure_[i] = k;
        }
    }

    std::string_view needle_;
    bool backward_;
    std::vector<std::size_t> failure_;  // empty for short needles
};

// Python's ADJUST_INDICES for find, count and startswith: end clamped to
// [0, length] and start to >= 0, negatives counted from the end. A start
// past the end stays there; callers see end - start < 0.
struct Window {
    std::int64_t start;
    std::int64_t end;
    std::int64_t length;  // of the whole text
};

Window adjustIndices(std::optional<std::int64_t> start, std::optional<std::int64_t> end, std::int64_t length) {
    Window w{start.value_or(0), end.value_or(kInt64Max), length};
    if (w.end > length) {
        w.end = length;
    } else if (w.end < 0) {
        w.end = std::max<std::int64_t>(w.end + length, 0);
    }
    if (w.start < 0) w.start = std::max<std::int64_t>(w.start + length, 0);
    return w;
}

// The bytes of code points [w.start, w.end); requires 0 <= start <= end.
std::string_view windowBytes(std::string_view text, Window w) {
    if (w.start == 0 && w.end == w.length) return text;  // no walk over the code points
    const std::size_t begin_byte = byteOffsetOf(text, w.start);
    const std::size_t end_byte = byteOffsetOf(text, w.end - w.start, begin_byte);
    return text.substr(begin_byte, end_byte - begin_byte);
}

std::int64_t countOf(std::string_view text) { return static_cast<std::int64_t>(codePointCount(text)); }

// --- Strip / split helpers -------------------------------------------------------

bool isSpaceAt(std::string_view text, std::size_t pos, unsigned& len) { return pyIsSpace(decodeAt(text, pos, len)); }

// Membership in the code points of `chars`, sorted: `chars` may be long.
class CodePointSet {
public:
    explicit CodePointSet(std::string_view chars) {
        for (std::size_t pos = 0; pos < chars.size();) {
            unsigned len = 0;
            sorted_.push_back(decodeAt(chars, pos, len));
            pos += len;
        }
        std::sort(sorted_.begin(), sorted_.end());
    }
    bool operator()(char32_t c) const { return std::binary_search(sorted_.begin(), sorted_.end(), c); }

private:
    std::vector<char32_t> sorted_;
};

template <typename Pred>
std::size_t leftEdge(std::string_view text, const Pred& strip) {
    std::size_t pos = 0;
    while (pos < text.size()) {
        unsigned len = 0;
        if (!strip(decodeAt(text, pos, len))) break;
        pos += len;
    }
    return pos;
}

template <typename Pred>
std::size_t rightEdge(std::string_view text, std::size_t floor, const Pred& strip) {
    std::size_t end = text.size();
    while (end > floor) {
        std::size_t before = end;
        if (!strip(decodeBefore(text, before))) break;
        end = before;
    }
    return end;
}

// Whether the code point at `pos` ends a line; `len` receives its length.
bool isLineBreakAt(std::string_view text, std::size_t pos, unsigned& len) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
        len = 1;
        return (byte >= '\n' && byte <= '\r') || (byte >= 0x1C && byte <= 0x1E);
    }
    return has(decodeAt(text, pos, len), tables::kLineBreak);
}

std::string padded(std::string_view text, std::int64_t left, std::int64_t right, std::string_view fill) {
    std::string out;
    out.reserve(text.size() + static_cast<std::size_t>(left + right) * fill.size());
    for (std::int64_t i = 0; i < left; ++i) out.append(fill);
    out.append(text);
    for (std::int64_t i = 0; i < right; ++i) out.append(fill);
    return out;
}

void appendHex(std::string& out, char prefix, char32_t c, int digits) {
    static constexpr char kHex[] = "0123456789abcdef";
    out.push_back('\\');
    out.push_back(prefix);
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out.push_back(kHex[(c >> shift) & 0xF]);
}

}  // namespace

std::string_view pyUnicodeVersion() { return tables::kUnicodeVersion; }

// --- Case ----------------------------------------------------------------------

std::string pyUpper(std::string_view text) {
    return mapEach(text, [](char32_t c, std::size_t, unsigned) { return upperOf(c); });
}

std::string pyLower(std::string_view text) {
    return mapEach(text, [text](char32_t c, std::size_t pos, unsigned len) { return lowerAt(text, pos, len, c); });
}

std::string pyTitle(std::string_view text) {
    bool previous_cased = false;
    return mapEach(text, [text, &previous_cased](char32_t c, std::size_t pos, unsigned len) {
        const Mapped m = previous_cased ? lowerAt(text, pos, len, c) : titleOf(c);
        previous_cased = has(c, tables::kCased);
        return m;
    });
}

std::string pyCapitalize(std::string_view text) {
    return mapEach(text, [text](char32_t c, std::size_t pos, unsigned len) {
        return pos == 0 ? titleOf(c) : lowerAt(text, pos, len, c);
    });
}

std::string pySwapcase(std::string_view text) {
    return mapEach(text, [text](char32_t c, std::size_t pos, unsigned len) {
        const std::uint16_t flags = flagsOf(c);
        if (flags & tables::kUpper) return lowerAt(text, pos, len, c);
        if (flags & tables::kLower) return upperOf(c);
        return Mapped{{c}, 1};
    });
}

// --- Character classes -----------------------------------------------------------

bool pyIsSpace(char32_t c) { return has(c, tables::kSpace); }
bool pyIsPrintable(char32_t c) { return has(c, tables::kPrintable); }

bool pyIsSpaceStr(std::string_view text) { return allOf(text, pyIsSpace); }
bool pyIsPrintableStr(std::string_view text) { return text.empty() || allOf(text, pyIsPrintable); }
bool pyIsAlpha(std::string_view text) {
    return allOf(text, [](char32_t c) { return has(c, tables::kAlpha); });
}
bool pyIsDigit(std::string_view text) {
    return allOf(text, [](char32_t c) { return has(c, tables::kDigit); });
}
bool pyIsDecimal(std::string_view text) {
    return allOf(text, [](char32_t c) { return has(c, tables::kDecimal); });
}
bool pyIsNumeric(std::string_view text) {
    return allOf(text, [](char32_t c) { return has(c, tables::kNumeric); });
}
bool pyIsAlnum(std::string_view text) {
    return allOf(
        text, [](char32_t c) { return has(c, tables::kAlpha | tables::kDecimal | tables::kDigit | tables::kNumeric); });
}

namespace {

// str.isupper / str.islower: no code point of the `wrong` classes, at least
// one of the `wanted` class.
bool allCasedAre(std::string_view text, std::uint16_t wanted, std::uint16_t wrong) {
    bool cased = false;
    for (std::size_t pos = 0; pos < text.size();) {
        unsigned len = 0;
        const std::uint16_t flags = flagsOf(decodeAt(text, pos, len));
        if (flags & wrong) return false;
        if (flags & wanted) cased = true;
        pos += len;
    }
    return cased;
}

}  // namespace

bool pyIsUpper(std::string_view text) { return allCasedAre(text, tables::kUpper, tables::kLower | tables::kTitle); }
bool pyIsLower(std::string_view text) { return allCasedAre(text, tables::kLower, tables::kUpper | tables::kTitle); }

bool pyIsTitle(std::string_view text) {
    bool cased = false;
    bool previous_cased = false;
    for (std::size_t pos = 0; pos < text.size();) {
        unsigned len = 0;
        const std::uint16_t flags = flagsOf(decodeAt(text, pos, len));
        pos += len;
        if (flags & (tables::kUpper | tables::kTitle)) {
            if (previous_cased) return false;
            previous_cased = cased = true;
        } else if (flags & tables::kLower) {
            if (!previous_cased) return false;
            previous_cased = cased = true;
        } else {
            previous_cased = false;
        }
    }
    return cased;
}

// --- Strip -----------------------------------------------------------------------

std::string_view pyStrip(std::string_view text) {
    const std::size_t begin = leftEdge(text, pyIsSpace);
    return text.substr(begin, rightEdge(text, begin, pyIsSpace) - begin);
}
std::string_view pyLstrip(std::string_view text) { return text.substr(leftEdge(text, pyIsSpace)); }
std::string_view pyRstrip(std::string_view text) { return text.substr(0, rightEdge(text, 0, pyIsSpace)); }

std::string_view pyStrip(std::string_view text, std::string_view chars) {
    const CodePointSet in_chars(chars);
    const std::size_t begin = leftEdge(text, in_chars);
    return text.substr(begin, rightEdge(text, begin, in_chars) - begin);
}
std::string_view pyLstrip(std::string_view text, std::string_view chars) {
    return text.substr(leftEdge(text, CodePointSet(chars)));
}
std::string_view pyRstrip(std::string_view text, std::string_view chars) {
    return text.substr(0, rightEdge(text, 0, CodePointSet(chars)));
}

// --- Split -------------------------------------------------------------------------

// CPython's stringlib split_whitespace, on byte offsets.
std::vector<std::string_view> pySplit(std::string_view text, std::int64_t maxsplit) {
    if (maxsplit < 0) maxsplit = kInt64Max;
    std::vector<std::string_view> parts;
    std::size_t pos = 0;
    unsigned len = 0;
    for (; maxsplit > 0; --maxsplit) {
        while (pos < text.size() && isSpaceAt(text, pos, len)) pos += len;
        if (pos == text.size()) break;
        const std::size_t begin = pos;
        while (pos < text.size() && !isSpaceAt(text, pos, len)) pos += len;
        parts.push_back(text.substr(begin, pos - begin));
    }
    // Only when maxsplit ran out: the rest, leading whitespace dropped, is
    // one last item.
    while (pos < text.size() && isSpaceAt(text, pos, len)) pos += len;
    if (pos < text.size()) parts.push_back(text.substr(pos));
    return parts;
}

std::vector<std::string_view> pyRsplit(std::string_view text, std::int64_t maxsplit) {
    if (maxsplit < 0) maxsplit = kInt64Max;
    std::vector<std::string_view> parts;
    std::size_t end = text.size();
    const auto space_before = [text](std::size_t at, std::size_t& start) {
        start = at;
        return pyIsSpace(decodeBefore(text, start));
    };
    std::size_t start = 0;
    for (; maxsplit > 0; --maxsplit) {
        while (end > 0 && space_before(end, start)) end = start;
        if (end == 0) break;
        std::size_t begin = end;
        while (begin > 0 && !space_before(begin, start)) begin = start;
        parts.push_back(text.substr(begin, end - begin));
        end = begin;
    }
    while (end > 0 && space_before(end, start)) end = start;
    if (end > 0) parts.push_back(text.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
}

std::vector<std::string_view> pySplit(std::string_view text, std::string_view sep, std::int64_t maxsplit) {
    if (sep.empty()) return {text};
    if (maxsplit < 0) maxsplit = kInt64Max;
    std::vector<std::string_view> parts;
    const Finder finder(sep, false);
    std::size_t pos = 0;
    for (; maxsplit > 0; --maxsplit) {
        const std::size_t found = finder.find(text, pos);
        if (found == std::string_view::npos) break;
        parts.push_back(text.substr(pos, found - pos));
        pos = found + sep.size();
    }
    parts.push_back(text.substr(pos));
    return parts;
}

std::vector<std::string_view> pyRsplit(std::string_view text, std::string_view sep, std::int64_t maxsplit) {
    if (sep.empty()) return {text};
    if (maxsplit < 0) maxsplit = kInt64Max;
    std::vector<std::string_view> parts;
    const Finder finder(sep, true);
    std::size_t end = text.size();
    for (; maxsplit > 0; --maxsplit) {
        const std::size_t found = finder.rfind(text, end);
        if (found == std::string_view::npos) break;
        parts.push_back(text.substr(found + sep.size(), end - found - sep.size()));
        end = found;
    }
    parts.push_back(text.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
}

std::vector<std::string_view> pySplitlines(std::string_view text, bool keepends) {
    std::vector<std::string_view> lines;
    std::size_t begin = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        unsigned len = 0;
        if (!isLineBreakAt(text, pos, len)) {
            pos += len;
            continue;
        }
        std::size_t next = pos + len;
        if (text[pos] == '\r' && next < text.size() && text[next] == '\n') ++next;
        lines.push_back(text.substr(begin, (keepends ? next : pos) - begin));
        begin = pos = next;
    }
    if (begin < text.size()) lines.push_back(text.substr(begin));
    return lines;
}

// --- Code points ---------------------------------------------------------------------

std::size_t codePointCount(std::string_view text) {
    return static_cast<std::size_t>(
        std::count_if(text.begin(), text.end(), [](char byte) { return !isContinuation(byte); }));
}

// PySlice_Unpack and PySlice_AdjustIndices.
std::string pySlice(std::string_view text, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                    std::int64_t step) {
    if (step == 0) return {};
    // Python clamps the step so that -step cannot overflow.
    step = std::max(step, -kInt64Max);
    const std::int64_t length = countOf(text);
    const auto adjust = [length, step](std::int64_t index) {
        if (index < 0) {
            index += length;
            if (index < 0) index = step < 0 ? -1 : 0;
        } else if (index >= length) {
            index = step < 0 ? length - 1 : length;
        }
        return index;
    };
    const std::int64_t first = adjust(start.value_or(step < 0 ? kInt64Max : 0));
    const std::int64_t last = adjust(stop.value_or(step < 0 ? kInt64Min : kInt64Max));
    std::int64_t slice_length = 0;
    if (step < 0 && last < first) slice_length = (first - last - 1) / -step + 1;
    if (step > 0 && first < last) slice_length = (last - first - 1) / step + 1;
    if (slice_length == 0) return {};

    if (step == 1) {
        const std::size_t begin = byteOffsetOf(text, first);
        return std::string(text.substr(begin, byteOffsetOf(text, slice_length, begin) - begin));
    }
    std::vector<std::size_t> offsets;  // offsets[i]: first byte of code point i; one past the end last
    offsets.reserve(static_cast<std::size_t>(length) + 1);
    for (std::size_t pos = 0; pos < text.size(); ++pos) {
        if (!isContinuation(text[pos])) offsets.push_back(pos);
    }
    offsets.push_back(text.size());
    std::string out;
    for (std::int64_t i = 0; i < slice_length; ++i) {
        // |i * step| stays below the length; a running sum would overflow
        // past the last item with a step near the int64 limits.
        const auto at = static_cast<std::size_t>(first + i * step);
        out.append(text.substr(offsets[at], offsets[at + 1] - offsets[at]));
    }
    return out;
}

std::optional<std::string_view> pyCharAt(std::string_view text, std::int64_t index) {
    if (index < 0) index += countOf(text);
    if (index < 0) return std::nullopt;
    const std::size_t begin = byteOffsetOf(text, index);
    if (begin == text.size()) return std::nullopt;
    unsigned len = 0;
    decodeAt(text, begin, len);
    return text.substr(begin, len);
}

// --- Search ----------------------------------------------------------------------------

bool pyContains(std::string_view text, std::string_view sub) {
    return sub.empty() || Finder(sub, false).find(text, 0) != std::string_view::npos;
}

std::int64_t pyFind(std::string_view text, std::string_view sub, std::optional<std::int64_t> start,
                    std::optional<std::int64_t> end) {
    const Window w = adjustIndices(start, end, countOf(text));
    if (w.end - w.start < countOf(sub)) return -1;
    if (sub.empty()) return w.start;
    const std::string_view hay = windowBytes(text, w);
    const std::size_t found = Finder(sub, false).find(hay, 0);
    if (found == std::string_view::npos) return -1;
    return w.start + countOf(hay.substr(0, found));
}

std::int64_t pyRfind(std::string_view text, std::string_view sub, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> end) {
    const Window w = adjustIndices(start, end, countOf(text));
    if (w.end - w.start < countOf(sub)) return -1;
    if (sub.empty()) return w.end;
    const std::string_view hay = windowBytes(text, w);
    const std::size_t found = Finder(sub, true).rfind(hay, hay.size());
    if (found == std::string_view::npos) return -1;
    return w.start + countOf(hay.substr(0, found));
}

std::int64_t pyCount(std::string_view text, std::string_view sub, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> end) {
    const Window w = adjustIndices(start, end, countOf(text));
    if (w.end - w.start < countOf(sub)) return 0;
    if (sub.empty()) return w.end - w.start + 1;
    const std::string_view hay = windowBytes(text, w);
    const Finder finder(sub, false);
    std::int64_t count = 0;
    for (std::size_t pos = finder.find(hay, 0); pos != std::string_view::npos; pos = finder.find(hay, pos)) {
        ++count;
        pos += sub.size();
    }
    return count;
}

namespace {

// CPython's tailmatch: does `affix` sit at the start (at_end: the end) of
// text[start:end]?
bool tailMatch(std::string_view text, std::string_view affix, std::optional<std::int64_t> start,
               std::optional<std::int64_t> end, bool at_end) {
    if (!start && !end) return at_end ? text.ends_with(affix) : text.starts_with(affix);
    Window w = adjustIndices(start, end, countOf(text));
    if (w.end - countOf(affix) < w.start) return false;
    if (affix.empty()) return true;
    const std::string_view window = windowBytes(text, w);
    return at_end ? window.ends_with(affix) : window.starts_with(affix);
}

}  // namespace

bool pyStartswith(std::string_view text, std::string_view prefix, std::optional<std::int64_t> start,
                  std::optional<std::int64_t> end) {
    return tailMatch(text, prefix, start, end, false);
}

bool pyEndswith(std::string_view text, std::string_view suffix, std::optional<std::int64_t> start,
                std::optional<std::int64_t> end) {
    return tailMatch(text, suffix, start, end, true);
}

std::string pyReplace(std::string_view text, std::string_view old, std::string_view replacement, std::int64_t count) {
    if (count < 0) count = kInt64Max;
    std::string out;
    if (old.empty()) {
        std::size_t pos = 0;
        for (; count > 0; --count) {
            out.append(replacement);
            if (pos == text.size()) return out;
            unsigned len = 0;
            decodeAt(text, pos, len);
            out.append(text.substr(pos, len));
            pos += len;
        }
        out.append(text.substr(pos));
        return out;
    }
    const Finder finder(old, false);
    std::size_t pos = 0;
    for (; count > 0; --count) {
        const std::size_t found = finder.find(text, pos);
        if (found == std::string_view::npos) break;
        out.append(text.substr(pos, found - pos));
        out.append(replacement);
        pos = found + old.size();
    }
    out.append(text.substr(pos));
    return out;
}

std::size_t pyReplacedSize(std::string_view text, std::string_view old, std::string_view replacement,
                           std::int64_t count) {
    if (count < 0) count = kInt64Max;
    std::uint64_t replacements = 0;
    if (old.empty()) {
        replacements = codePointCount(text) + 1;
    } else {
        const Finder finder(old, false);
        for (std::size_t pos = 0; replacements < static_cast<std::uint64_t>(count); ++replacements) {
            const std::size_t found = finder.find(text, pos);
            if (found == std::string_view::npos) break;
            pos = found + old.size();
        }
    }
    replacements = std::min<std::uint64_t>(replacements, static_cast<std::uint64_t>(count));
    const std::size_t removed = old.size() * replacements;  // <= text.size()
    std::size_t added = 0;
    if (__builtin_mul_overflow(replacement.size(), replacements, &added)) return SIZE_MAX;
    std::size_t total = 0;
    if (__builtin_add_overflow(text.size() - removed, added, &total)) return SIZE_MAX;
    return total;
}

// --- Padding -----------------------------------------------------------------------------

std::string pyCenter(std::string_view text, std::int64_t width, std::string_view fill) {
    const std::int64_t length = countOf(text);
    if (width <= length) return std::string(text);
    const std::int64_t margin = width - length;
    // CPython's rounding: the odd column goes left only when width is odd.
    const std::int64_t left = margin / 2 + (margin & width & 1);
    return padded(text, left, margin - left, fill);
}

std::string pyLjust(std::string_view text, std::int64_t width, std::string_view fill) {
    const std::int64_t length = countOf(text);
    return width <= length ? std::string(text) : padded(text, 0, width - length, fill);
}

std::string pyRjust(std::string_view text, std::int64_t width, std::string_view fill) {
    const std::int64_t length = countOf(text);
    return width <= length ? std::string(text) : padded(text, width - length, 0, fill);
}

std::string pyZfill(std::string_view text, std::int64_t width) {
    const std::int64_t length = countOf(text);
    if (width <= length) return std::string(text);
    const std::size_t zeros = static_cast<std::size_t>(width - length);
    std::string out;
    out.reserve(text.size() + zeros);
    if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
        out.push_back(text[0]);
        text.remove_prefix(1);
    }
    out.append(zeros, '0');
    out.append(text);
    return out;
}

// --- Repr ----------------------------------------------------------------------------------

// CPython's unicode_repr.
std::string pyRepr(std::string_view text) {
    const bool has_single = text.find('\'') != std::string_view::npos;
    const bool has_double = text.find('"') != std::string_view::npos;
    const char quote = has_single && !has_double ? '"' : '\'';
    std::string out;
    out.reserve(text.size() + 2);
    out.push_back(quote);
    for (std::size_t pos = 0; pos < text.size();) {
        unsigned len = 0;
        const char32_t c = decodeAt(text, pos, len);
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c == '\t') {
            out.append("\\t");
        } else if (c == '\n') {
            out.append("\\n");
        } else if (c == '\r') {
            out.append("\\r");
        } else if (c < 0x20 || c == 0x7F) {
            appendHex(out, 'x', c, 2);
        } else if (c < 0x7F || pyIsPrintable(c)) {
            out.append(text.substr(pos, len));
        } else if (c < 0x100) {
            appendHex(out, 'x', c, 2);
        } else if (c < 0x10000) {
            appendHex(out, 'u', c, 4);
        } else {
            appendHex(out, 'U', c, 8);
        }
        pos += len;
    }
    out.push_back(quote);
    return out;
}

}  // namespace dpgate::admission::jinja
