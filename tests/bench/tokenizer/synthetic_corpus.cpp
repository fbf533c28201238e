#include "synthetic_corpus.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>

namespace dpgate::bench {

void appendUtf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

std::vector<std::string> makeLexicon(Rng& rng, std::size_t n) {
    static const char* kCommon[] = {"the",   "of",  "and",  "to",    "in",     "a",     "is",      "that", "for",
                                    "it",    "as",  "was",  "with",  "be",     "by",    "on",      "not",  "he",
                                    "this",  "are", "or",   "his",   "from",   "at",    "which",   "but",  "have",
                                    "an",    "had", "they", "you",   "were",   "their", "one",     "all",  "we",
                                    "can",   "her", "has",  "there", "been",   "if",    "more",    "when", "will",
                                    "would", "who", "so",   "no",    "system", "model", "request", "token"};
    static const char* kSyllables[] = {"ba",   "ce",  "di",  "fo", "gu", "ha", "je",  "ki",  "lo",  "mu", "na",
                                       "pe",   "qui", "ro",  "su", "ta", "ve", "wi",  "xo",  "yu",  "za", "tion",
                                       "ment", "er",  "ing", "ed", "ly", "al", "con", "pro", "str", "th", "ough",
                                       "ight", "ous", "ble", "an", "en", "in", "on",  "un"};
    std::vector<std::string> words(std::begin(kCommon), std::end(kCommon));
    while (words.size() < n) {
        std::string w;
        const std::size_t syllables = 1 + rng.below(4);
        for (std::size_t i = 0; i < syllables; ++i) w += kSyllables[rng.below(std::size(kSyllables))];
        words.push_back(w);
    }
    return words;
}

std::string englishParagraph(Rng& rng, const std::vector<std::string>& lexicon) {
    std::string out;
    const std::size_t sentences = 3 + rng.below(6);
    for (std::size_t s = 0; s < sentences; ++s) {
        const std::size_t n = 5 + rng.below(20);
        for (std::size_t i = 0; i < n; ++i) {
            std::string w = lexicon[rng.zipf(lexicon.size())];
            if (i == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
            out += w;
            if (rng.below(40) == 0) {
                out += ' ';
                out += std::to_string(rng.below(100000));
            }
            if (i + 1 < n) out += rng.below(12) == 0 ? ", " : " ";
        }
        out += rng.below(10) == 0 ? "? " : ". ";
    }
    out.back() = '\n';
    out += '\n';
    return out;
}

std::string chineseParagraph(Rng& rng) {
    static const std::uint32_t kPunct[] = {0xff0c, 0x3002, 0x3001, 0xff1a, 0x201c, 0x201d, 0xff1f};
    std::string out;
    const std::size_t sentences = 2 + rng.below(5);
    for (std::size_t s = 0; s < sentences; ++s) {
        const std::size_t n = 8 + rng.below(30);
        for (std::size_t i = 0; i < n; ++i) {
            if (rng.below(25) == 0) {
                appendUtf8(out, kPunct[rng.below(std::size(kPunct))]);
            } else if (rng.below(60) == 0) {
                out += std::to_string(rng.below(3000));
            } else if (rng.below(80) == 0) {
                out += " GPU ";
            } else {
                appendUtf8(out, 0x4e00 + static_cast<std::uint32_t>(rng.zipf(3500)) * 5);
            }
        }
        appendUtf8(out, 0x3002);
    }
    out += '\n';
    return out;
}

std::string codeBlock(Rng& rng, const std::vector<std::string>& lexicon) {
    auto ident = [&] {
        std::string a = lexicon[rng.zipf(lexicon.size())];
        if (rng.below(2) == 0) a += "_" + lexicon[rng.zipf(lexicon.size())];
        return a;
    };
    std::string out;
    if (rng.below(2) == 0) {
        out += "static int " + ident() + "(const std::vector<int>& " + ident() + ", size_t n) {\n";
        const std::size_t lines = 3 + rng.below(12);
        for (std::size_t i = 0; i < lines; ++i) {
            out += std::string(2 + 2 * rng.below(3), ' ');
            switch (rng.below(4)) {
                case 0:
                    out += "for (size_t i = 0; i < n; ++i) " + ident() + " += " + ident() + "[i] * " +
                           std::to_string(rng.below(1000)) + ";\n";
                    break;
                case 1:
                    out += "if (" + ident() + " != nullptr && " + ident() + "->size() > 0x" +
                           std::to_string(rng.below(0xffff)) + ") {\n";
                    break;
                case 2: out += "// " + ident() + ": keep " + ident() + " in sync\n"; break;
                default:
                    out += "auto " + ident() + " = std::make_unique<" + ident() + ">(\"" + ident() + "\");\n";
                    break;
            }
        }
        out += "  return 0;\n}\n\n";
    } else {
        out += "def " + ident() + "(self, " + ident() + ", " + ident() + "=None):\n";
        const std::size_t lines = 3 + rng.below(12);
        for (std::size_t i = 0; i < lines; ++i) {
            out += std::string(4 + 4 * rng.below(2), ' ');
            switch (rng.below(4)) {
                case 0: out += ident() + " = [x ** 2 for x in range(" + std::to_string(rng.below(100)) + ")]\n"; break;
                case 1: out += "if not " + ident() + ":\n"; break;
                case 2: out += "# " + ident() + " " + ident() + "\n"; break;
                default:
                    out +=
                        "return {\"" + ident() + "\": " + ident() + ", 'n': " + std::to_string(rng.below(9999)) + "}\n";
                    break;
            }
        }
        out += "\n";
    }
    return out;
}

std::string chatTurn(Rng& rng, const std::vector<std::string>& lexicon) {
    std::string out = rng.below(2) == 0 ? "User: " : "Assistant: ";
    switch (rng.below(5)) {
        case 0: out += chineseParagraph(rng); break;
        case 1: out += "Here is the code:\n```\n" + codeBlock(rng, lexicon) + "```\n"; break;
        case 2:
            out += "{\"tool\": \"search\", \"args\": {\"q\": \"" + lexicon[rng.zipf(lexicon.size())] +
                   "\", \"limit\": 10}} \xf0\x9f\x98\x80\n";
            break;
        default: out += englishParagraph(rng, lexicon); break;
    }
    return out;
}

std::string trimToCharBoundary(std::string text, std::size_t bytes) {
    if (text.size() <= bytes) return text;
    while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xc0) == 0x80) --bytes;
    text.resize(bytes);
    return text;
}

}  // namespace dpgate::bench
