#include "gateway/usage/written_usage.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

namespace dpgate::gateway {
namespace {

bool isJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The five keys backends write matched whole, other keys byte by byte,
// counts digit by digit.
class WrittenUsage {
public:
    explicit WrittenUsage(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

    // False when unsure; otherwise `out` is what readUsage would give.
    // `alone`: nothing but whitespace may follow the object.
    bool read(UsageCounts& out, bool alone) {
        if (!object(false)) return false;
        if (alone) {
            space();
            if (p_ != end_) return false;
        }
        out = UsageCounts{.prompt = prompt_, .completion = completion_, .cached = cached_, .total = total_};
        return true;
    }

private:
    enum class Key { prompt, completion, details, cached, total, other };

    // What a plain key may hold: printable ASCII but the quote and the backslash.
    static constexpr std::array<bool, 256> kKeyBytes = [] {
        std::array<bool, 256> bytes{};
        for (int c = 0x20; c < 0x7f; ++c) bytes[size_t(c)] = c != '"' && c != '\\';
        return bytes;
    }();

    void space() {
        while (p_ != end_ && isJsonSpace(*p_)) ++p_;
    }
    // `c`, after any whitespace. Backends write usage without any, so the
    // byte is looked at first, and the whitespace only when it is not `c`.
    bool take(char c) {
        if (p_ == end_ || *p_ != c) {
            space();
            if (p_ == end_ || *p_ != c) return false;
        }
        ++p_;
        return true;
    }
    // Whether the text at p_ begins with `literal`; if so, p_ moves past it.
    template <size_t N>
    bool skip(const char (&literal)[N]) {
        if (size_t(end_ - p_) < N - 1 || std::memcmp(p_, literal, N - 1) != 0) return false;
        p_ += N - 1;
        return true;
    }
    // A key with its quotes. The keys backends write are matched whole, with
    // the closing quote; any other is read byte by byte.
    bool key(Key& out) {
        if (!take('"')) return false;
        out = knownKey();
        if (out != Key::other) return true;
        // Not a key above: its name differs from theirs, or it is not plain.
        while (p_ != end_ && kKeyBytes[static_cast<unsigned char>(*p_)]) ++p_;
        if (p_ == end_ || *p_ != '"') return false;
        ++p_;
        return true;
    }
    // The key at p_ (past its opening quote) when it is one backends write,
    // p_ then past its closing quote; `other`, p_ unmoved, when it is not.
    Key knownKey() {
        switch (p_ == end_ ? '\0' : *p_) {
            case 'p':
                if (skip("prompt_tokens\"")) return Key::prompt;
                if (skip("prompt_tokens_details\"")) return Key::details;
                break;
            case 'c':
                if (skip("completion_tokens\"")) return Key::completion;
                if (skip("cached_tokens\"")) return Key::cached;
                break;
            case 't':
                if (skip("total_tokens\"")) return Key::total;
                break;
            default: break;
        }
        return Key::other;
    }
    // A count (0, or up to 19 digits without a leading zero) or null.
    bool count(std::optional<uint64_t>& out) {
        space();
        if (skip("null")) {
            out.reset();
            return true;
        }
        const char* const start = p_;
        uint64_t value = 0;
        while (p_ != end_ && *p_ >= '0' && *p_ <= '9') value = value * 10 + uint64_t(*p_++ - '0');
        const size_t digits = size_t(p_ - start);
        if (digits == 0 || digits > 19 || (digits > 1 && *start == '0')) return false;
        out = value;
        return true;
    }
    bool object(bool details) {
        if (!take('{')) return false;
        if (take('}')) return true;
        do {
            Key name;
            if (!key(name) || !take(':')) return false;
            std::optional<uint64_t> value;
            if (!details && name == Key::details) {
                cached_.reset();  // the last one counts, whatever it is
                space();
                if (p_ != end_ && *p_ == '{') {
                    if (!object(true)) return false;
                } else if (!count(value) || value) {
                    return false;
                }
                continue;
            }
            if (!count(value)) return false;
            if (details) {
                if (name == Key::cached) cached_ = value;
            } else if (name == Key::prompt) {
                prompt_ = value;
            } else if (name == Key::completion) {
                completion_ = value;
            } else if (name == Key::total) {
                total_ = value;
            }
        } while (take(','));
        return take('}');
    }

    const char* p_;
    const char* const end_;
    std::optional<uint64_t> prompt_, completion_, cached_, total_;
};

}  // namespace

bool readWrittenUsage(std::string_view text, bool alone, UsageCounts& out) noexcept {
    return WrittenUsage(text).read(out, alone);
}

}  // namespace dpgate::gateway
