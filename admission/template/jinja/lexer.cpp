#include "admission/template/jinja/lexer.hpp"

#include <algorithm>
#include <array>

namespace dpgate::admission::jinja {

namespace {

// Decodes one UTF-8 code point at `pos` (input is valid UTF-8); sets `length`.
char32_t decodeAt(std::string_view s, std::size_t pos, std::size_t& length) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    if (b0 < 0x80) {
        length = 1;
        return b0;
    }
    const int extra = b0 >= 0xf0 ? 3 : b0 >= 0xe0 ? 2 : 1;
    char32_t cp = b0 & (0x3f >> extra);
    for (int i = 1; i <= extra && pos + i < s.size(); ++i)
        cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3f);
    length = static_cast<std::size_t>(extra) + 1;
    return cp;
}

// Python's \s and str.isspace().
bool isUnicodeSpace(char32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// Bytes of whitespace (Python's sense) at the start of `s`.
std::size_t leadingSpace(std::string_view s) {
    std::size_t pos = 0;
    while (pos < s.size()) {
        std::size_t length = 1;
        if (!isUnicodeSpace(decodeAt(s, pos, length))) break;
        pos += length;
    }
    return pos;
}

// Python's str.rstrip().
std::string_view rstripSpace(std::string_view s) {
    std::size_t end = s.size();
    while (end > 0) {
        std::size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
        std::size_t length = 1;
        if (!isUnicodeSpace(decodeAt(s, start, length))) break;
        end = start;
    }
    return s.substr(0, end);
}

bool allSpace(std::string_view s) { return leadingSpace(s) == s.size(); }

bool isNameStart(unsigned char c) { return c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0x80; }
bool isNameChar(unsigned char c) { return isNameStart(c) || (c >= '0' && c <= '9'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
int hexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
    return -1;
}

void appendUtf8(std::string& out, char32_t cp) {
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

// A string literal's body decoded as Jinja does it (Python's "unicode-escape"
// codec): \n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh \ooo and friends; an unknown
// escape keeps its backslash.
std::optional<std::string> decodeStringLiteral(std::string_view body, std::string& error) {
    std::string out;
    out.reserve(body.size());
    for (std::size_t i = 0; i < body.size(); ++i) {
        const char c = body[i];
        if (c != '\\' || i + 1 == body.size()) {
            out += c;
            continue;
        }
        const char e = body[++i];
        switch (e) {
            case '\n': break;  // a line continuation
            case '\\':
            case '\'':
            case '"': out += e; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'v': out += '\v'; break;
            case 'x':
            case 'u':
            case 'U': {
                const std::size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                char32_t cp = 0;
                for (std::size_t k = 0; k < digits; ++k) {
                    const int v = i + 1 + k < body.size() ? hexValue(body[i + 1 + k]) : -1;
                    if (v < 0) {
                        error = std::string("truncated \\") + e + std::string(digits, 'X') + " escape";
                        return std::nullopt;
                    }
                    cp = cp * 16 + static_cast<char32_t>(v);
                }
                i += digits;
                if (cp > 0x10ffff) {
                    error = "illegal Unicode character";
                    return std::nullopt;
                }
                if (cp >= 0xd800 && cp <= 0xdfff) {
                    error = "a surrogate code point cannot be rendered";
                    return std::nullopt;
                }
                appendUtf8(out, cp);
                break;
            }
            case 'N': error = "\\N{...} escapes are not supported"; return std::nullopt;
            default:
                if (e >= '0' && e <= '7') {
                    char32_t cp = static_cast<char32_t>(e - '0');
                    for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
                        cp = cp * 8 + static_cast<char32_t>(body[++i] - '0');
                    }
                    appendUtf8(out, cp);
                } else {
                    out += '\\';
                    out += e;
                }
        }
    }
    return out;
}

class Lexer {
public:
    Lexer(std::string_view source, std::vector<Token>& tokens) : src_(normalize(source)), tokens_(tokens) {}

    std::optional<LexError> run() {
        std::size_t pos = 0;
        bool line_starting = true;
        while (pos < src_.size()) {
            const std::size_t open = findOpen(pos);
            if (open == std::string::npos) {
                emitData(src_.substr(pos));
                break;
            }
            std::string_view text = std::string_view(src_).substr(pos, open - pos);
            const char kind = src_[open + 1];  // '{', '%' or '#'
            std::size_t p = open + 2;
            char sign = 0;
            if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
            if (sign == '-') {
                text = rstripSpace(text);
            } else if (sign != '+' && kind != '{') {
                const std::size_t l_pos = text.rfind('\n') + 1;  // npos + 1 == 0
                const std::string_view tail = text.substr(l_pos);
                if ((l_pos > 0 || line_starting) && !tail.empty() && allSpace(tail)) text = text.substr(0, l_pos);
            }
            line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos),
                                                 src_.begin() + static_cast<std::ptrdiff_t>(open), '\n'));
            emitData(text);
            std::optional<LexError> error;
            if (kind == '#') {
                error = comment(p, pos, line_starting);
            } else if (kind == '%' && isRaw(p)) {
                error = raw(p, pos, line_starting);
            } else {
                error = tag(kind == '{', p, pos, line_starting);
            }
            if (error) return error;
        }
        tokens_.push_back(Token{TokenKind::eof, {}, line_});
        return std::nullopt;
    }

private:
    static std::string normalize(std::string_view source) {
        std::string out;
        out.reserve(source.size());
        for (std::size_t i = 0; i < source.size(); ++i) {
            if (source[i] == '\r') {
                out += '\n';
                if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
            } else {
                out += source[i];
            }
        }
        if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
        return out;
    }

    std::size_t findOpen(std::size_t from) const {
        for (std::size_t at = src_.find('{', from); at != std::string::npos; at = src_.find('{', at + 1)) {
            if (at + 1 < src_.size() && (src_[at + 1] == '{' || src_[at + 1] == '%' || src_[at + 1] == '#')) return at;
        }
        return std::string::npos;
    }

    void emitData(std::string_view text) {
        if (text.empty()) return;
        tokens_.push_back(Token{TokenKind::data, std::string(text), line_});
    }

    std::size_t skipSpace(std::size_t p) const { return p + leadingSpace(std::string_view(src_).substr(p)); }

    bool startsWith(std::size_t p, std::string_view what) const { return src_.compare(p, what.size(), what) == 0; }

    // `{% raw %}` right after `{%` (and its sign), with optional spaces.
    bool isRaw(std::size_t p) const {
        p = skipSpace(p);
        if (!startsWith(p, "raw")) return false;
        p = skipSpace(p + 3);
        return startsWith(p, "%}") || startsWith(p, "-%}");
    }

    void countLines(std::size_t from, std::size_t to) {
        line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(from),
                                             src_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
    }

    // After `%}` / `#}`: `+` keeps the newline, `-` eats all whitespace,
    // otherwise trim_blocks eats one newline. Returns the end position.
    std::size_t afterBlockEnd(char sign, std::size_t end, bool& line_starting) {
        const std::size_t start = end;
        if (sign == '-') {
            end = skipSpace(end);
        } else if (sign != '+' && end < src_.size() && src_[end] == '\n') {
            ++end;
        }
        line_starting = end > 0 && src_[end - 1] == '\n';
        countLines(start, end);
        return end;
    }

    std::optional<LexError> comment(std::size_t p, std::size_t& pos, bool& line_starting) {
        const std::size_t close = src_.find("#}", p);
        if (close == std::string::npos) return LexError{"Missing end of comment tag", line_};
        const char sign = close > p && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
        countLines(p, close);
        line_starting = false;
        pos = afterBlockEnd(sign, close + 2, line_starting);
        return std::nullopt;
    }

    std::optional<LexError> raw(std::size_t p, std::size_t& pos, bool& line_starting) {
        // `{% raw %}` ends with `%}` or `-%}` + whitespace; no trim_blocks here.
        p = skipSpace(skipSpace(p) + 3);
        if (src_[p] == '-') {
            p = skipSpace(p + 3);
        } else {
            p += 2;
        }
        line_starting = p > 0 && src_[p - 1] == '\n';
        for (std::size_t at = src_.find("{%", p); at != std::string::npos; at = src_.find("{%", at + 1)) {
            std::size_t q = at + 2;
            char sign = 0;
            if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
            q = skipSpace(q);
            if (!startsWith(q, "endraw")) continue;
            q = skipSpace(q + 6);
            char end_sign = 0;
            if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
            if (!startsWith(q, "%}")) continue;
            std::string_view text = std::string_view(src_).substr(p, at - p);
            if (sign == '-') {
                text = rstripSpace(text);
            } else if (sign != '+') {
                const std::size_t l_pos = text.rfind('\n') + 1;
                const std::string_view tail = text.substr(l_pos);
                if ((l_pos > 0 || line_starting) && !tail.empty() && allSpace(tail)) text = text.substr(0, l_pos);
            }
            emitData(text);
            countLines(p, q);
            pos = afterBlockEnd(end_sign, q + 2, line_starting);
            return std::nullopt;
        }
        return LexError{"Missing end of raw directive", line_};
    }

    std::optional<LexError> tag(bool variable, std::size_t p, std::size_t& pos, bool& line_starting) {
        tokens_.push_back(Token{variable ? TokenKind::variable_begin : TokenKind::block_begin, {}, line_});
        std::vector<char> balance;
        for (;;) {
            const std::size_t spaced = skipSpace(p);
            countLines(p, spaced);
            p = spaced;
            if (p >= src_.size()) {
                return LexError{variable ? "unexpected end of template, expected 'end of print statement'."
                                         : "unexpected end of template, expected 'end of statement block'.",
                                line_};
            }
            if (balance.empty()) {
                if (variable) {
                    if (startsWith(p, "-}}")) {
                        tokens_.push_back(Token{TokenKind::variable_end, {}, line_});
                        const std::size_t end = skipSpace(p + 3);
                        countLines(p, end);
                        line_starting = end > 0 && src_[end - 1] == '\n';
                        pos = end;
                        return std::nullopt;
                    }
                    if (startsWith(p, "}}")) {
                        tokens_.push_back(Token{TokenKind::variable_end, {}, line_});
                        line_starting = false;
                        pos = p + 2;
                        return std::nullopt;
                    }
                } else if (startsWith(p, "%}") || startsWith(p, "-%}") || startsWith(p, "+%}")) {
                    tokens_.push_back(Token{TokenKind::block_end, {}, line_});
                    const char sign = src_[p] == '%' ? 0 : src_[p];
                    pos = afterBlockEnd(sign, p + (sign ? 3 : 2), line_starting);
                    return std::nullopt;
                }
            }
            if (auto error = token(p, balance)) return error;
        }
    }

    std::optional<LexError> token(std::size_t& p, std::vector<char>& balance) {
        const char c = src_[p];
        if (isDigit(c)) return number(p);
        if (isNameStart(static_cast<unsigned char>(c))) {
            std::size_t end = p;
            while (end < src_.size() && isNameChar(static_cast<unsigned char>(src_[end]))) ++end;
            tokens_.push_back(Token{TokenKind::name, src_.substr(p, end - p), line_});
            p = end;
            return std::nullopt;
        }
        if (c == '\'' || c == '"') return string(p);
        static constexpr std::array<std::string_view, 6> kTwo = {"//", "**", "==", "!=", ">=", "<="};
        for (std::string_view op : kTwo) {
            if (startsWith(p, op)) {
                tokens_.push_back(Token{TokenKind::op, std::string(op), line_});
                p += 2;
                return std::nullopt;
            }
        }
        static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
        if (kOne.find(c) == std::string_view::npos) {
            return LexError{std::string("unexpected char '") + c + "' at " + std::to_string(p), line_};
        }
        if (c == '(' || c == '[' || c == '{') {
            balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        } else if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) return LexError{std::string("unexpected '") + c + "'", line_};
            if (balance.back() != c) {
                return LexError{std::string("unexpected '") + c + "', expected '" + balance.back() + "'", line_};
            }
            balance.pop_back();
        }
        tokens_.push_back(Token{TokenKind::op, std::string(1, c), line_});
        ++p;
        return std::nullopt;
    }

    // Digits with `_` separators: integer (also 0b/0o/0x) or float (a
    // fraction and/or an exponent), as Jinja's integer_re and float_re.
    std::optional<LexError> number(std::size_t& p) {
        auto digitsAt = [&](std::size_t at, auto is_digit) {
            std::size_t end = at;
            while (end < src_.size() && (is_digit(src_[end]) || (src_[end] == '_' && end > at &&
                                                                 end + 1 < src_.size() && is_digit(src_[end + 1])))) {
                ++end;
            }
            return end;
        };
        auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
        if (src_[p] == '0' && p + 1 < src_.size() &&
            std::string_view("bBoOxX").find(src_[p + 1]) != std::string_view::npos) {
            const char base = static_cast<char>(src_[p + 1] | 0x20);
            auto in_base = [base](char ch) {
                if (base == 'b') return ch == '0' || ch == '1';
                if (base == 'o') return ch >= '0' && ch <= '7';
                return hexValue(ch) >= 0;
            };
            std::size_t start = p + 2;
            if (start < src_.size() && src_[start] == '_') ++start;
            const std::size_t end = digitsAt(start, in_base);
            if (end > start) {
                std::string text = src_.substr(p, end - p);
                text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
                tokens_.push_back(Token{TokenKind::integer, text, line_});
                p = end;
                return std::nullopt;
            }
        }
        std::size_t end = digitsAt(p, dec);
        bool is_float = false;
        if (end + 1 < src_.size() && src_[end] == '.' && dec(src_[end + 1])) {
            end = digitsAt(end + 1, dec);
            is_float = true;
        }
        if (end < src_.size() && (src_[end] | 0x20) == 'e') {
            std::size_t e = end + 1;
            if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
            if (e < src_.size() && dec(src_[e])) {
                end = digitsAt(e, dec);
                is_float = true;
            }
        }
        std::string text = src_.substr(p, end - p);
        text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
        tokens_.push_back(Token{is_float ? TokenKind::floating : TokenKind::integer, text, line_});
        p = end;
        return std::nullopt;
    }

    std::optional<LexError> string(std::size_t& p) {
        const char quote = src_[p];
        std::size_t end = p + 1;
        while (end < src_.size() && src_[end] != quote) end += src_[end] == '\\' ? 2 : 1;
        if (end >= src_.size()) return LexError{"unexpected end of string literal", line_};
        std::string error;
        auto decoded = decodeStringLiteral(std::string_view(src_).substr(p + 1, end - p - 1), error);
        if (!decoded) return LexError{error, line_};
        tokens_.push_back(Token{TokenKind::string, std::move(*decoded), line_});
        countLines(p, end);
        p = end + 1;
        return std::nullopt;
    }

    std::string src_;
    std::vector<Token>& tokens_;
    int line_ = 1;
};

}  // namespace

std::optional<LexError> lexTemplate(std::string_view source, std::vector<Token>& tokens) {
    tokens.clear();
    return Lexer(source, tokens).run();
}

}  // namespace dpgate::admission::jinja
