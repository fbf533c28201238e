#include "gateway/path/access_log.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <type_traits>

#include <fcntl.h>
#include <unistd.h>

namespace dpgate::gateway {

namespace {

// JSON string contents for values dpgate did not write itself (request ids,
// paths, key names): quotes, backslashes and control bytes escaped; bytes
// that are not valid UTF-8 are replaced so the line always parses.
void appendJsonString(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    out.push_back('"');
    for (size_t i = 0; i < text.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(text[i]);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(char(c));
        } else if (c < 0x20 || c == 0x7f) {
            out.append("\\u00").push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
        } else if (c < 0x80) {
            out.push_back(char(c));
        } else {
            // Keep a well-formed UTF-8 sequence (no overlongs, no
            // surrogates, nothing past U+10FFFF), replace anything else.
            size_t length = c >= 0xf5 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
            bool ok = length != 0 && i + length <= text.size();
            if (ok) {
                unsigned char second = static_cast<unsigned char>(text[i + 1]);
                unsigned char low = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
                unsigned char high = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
                ok = second >= low && second <= high;
            }
            for (size_t k = 2; ok && k < length; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
            if (ok) {
                out.append(text.substr(i, length));
                i += length - 1;
            } else {
                out.append("\\ufffd");
            }
        }
    }
    out.push_back('"');
}

void appendField(std::string& out, std::string_view name) { out.append(",\"").append(name).append("\":"); }

template <typename Integer>
void appendInteger(std::string& out, Integer value) {
    char text[24];
    auto end = std::to_chars(text, text + sizeof text, value).ptr;
    out.append(text, size_t(end - text));
}

// Milliseconds with three decimals, from whole microseconds (as "%.3f" of
// the milliseconds would print them, without printf's float formatting).
void appendMillis(std::string& out, int64_t micros) {
    if (micros < 0) {
        out.push_back('-');
        micros = -micros;
    }
    appendInteger(out, micros / 1000);
    const auto rest = int(micros % 1000);
    const char decimals[4] = {'.', char('0' + rest / 100), char('0' + rest / 10 % 10), char('0' + rest % 10)};
    out.append(decimals, sizeof decimals);
}

// "2025-12-02T13:20:00.123Z", from the civil calendar of <chrono>: no
// gmtime_r and strftime per line (gmtime_r takes glibc's time-zone lock,
// which every worker would share).
void appendUtcStamp(std::string& out, std::chrono::system_clock::time_point time) {
    using namespace std::chrono;
    const auto millis = floor<milliseconds>(time);
    const auto day = floor<days>(millis);
    const year_month_day date{day};
    const hh_mm_ss clock{millis - day};
    const int year = int(date.year());
    if (year < 0 || year > 9999) {  // not a clock this gateway will see; still valid JSON
        appendInteger(out, year);
        return;
    }
    char text[24];
    auto put = [&text](size_t at, unsigned value, int digits) {
        for (int i = digits - 1; i >= 0; --i, value /= 10) text[at + size_t(i)] = char('0' + value % 10);
    };
    put(0, unsigned(year), 4);
    text[4] = '-';
    put(5, unsigned(date.month()), 2);
    text[7] = '-';
    put(8, unsigned(date.day()), 2);
    text[10] = 'T';
    put(11, unsigned(clock.hours().count()), 2);
    text[13] = ':';
    put(14, unsigned(clock.minutes().count()), 2);
    text[16] = ':';
    put(17, unsigned(clock.seconds().count()), 2);
    text[19] = '.';
    put(20, unsigned(clock.subseconds().count()), 3);
    text[23] = 'Z';
    out.append(text, sizeof text);
}

}  // namespace

std::string formatAccessLine(const AccessRecord& r, CycleClock::time_point now) {
    std::string out;
    appendAccessLine(out, r, now);
    return out;
}

namespace {

// The record's strings. With the facts (plain values) they are every field:
// a field added to the record outside AccessFacts must be added here.
constexpr std::string AccessRecord::*kTexts[] = {
    &AccessRecord::request_id, &AccessRecord::method,  &AccessRecord::path,     &AccessRecord::key_name,
    &AccessRecord::key_hash,   &AccessRecord::backend, &AccessRecord::rejection};
static_assert(std::is_trivially_copyable_v<AccessFacts>);
static_assert(sizeof(AccessRecord) == sizeof(AccessFacts) + std::size(kTexts) * sizeof(std::string));

}  // namespace

void AccessRecord::reset() {
    // One assignment of plain values and seven cleared strings: about 200
    // bytes of code, run per request. Building a new record and moving the
    // buffers back through it compiled to 5 KB.
    static_cast<AccessFacts&>(*this) = AccessFacts{};
    for (std::string AccessRecord::*text : kTexts) (this->*text).clear();
}

void appendAccessLine(std::string& out, const AccessRecord& r, CycleClock::time_point now) {
    out.reserve(out.size() + 384);
    const auto began = r.time != std::chrono::system_clock::time_point{}
                           ? r.time
                           : std::chrono::system_clock::now() -
                                 std::chrono::duration_cast<std::chrono::system_clock::duration>(now - r.started);
    out.append("{\"time\":\"");
    appendUtcStamp(out, began);
    out.push_back('"');
    appendField(out, "request_id");
    appendJsonString(out, r.request_id);
    appendField(out, "method");
    appendJsonString(out, r.method);
    appendField(out, "path");
    appendJsonString(out, r.path);
    appendField(out, "key");
    if (r.key_name.empty()) out.append("null");
    else appendJsonString(out, r.key_name);
    appendField(out, "key_hash");
    if (r.key_hash.empty()) out.append("null");
    else appendJsonString(out, r.key_hash);
    appendField(out, "backend");
    if (r.backend.empty()) out.append("null");
    else appendJsonString(out, r.backend);
    appendField(out, "rank");
    if (r.rank < 0) out.append("null");
    else appendInteger(out, r.rank);
    appendField(out, "status");
    appendInteger(out, r.status);
    appendField(out, "stream");
    out.append(r.stream ? "true" : "false");
    appendField(out, "images");
    appendInteger(out, r.images);
    appendField(out, "prompt_tokens");
    if (r.usage) appendInteger(out, r.usage->prompt_tokens);
    else out.append("null");
    appendField(out, "cached_tokens");
    if (r.usage) appendInteger(out, r.usage->cached_prompt_tokens);
    else out.append("null");
    appendField(out, "completion_tokens");
    if (r.usage) appendInteger(out, r.usage->completion_tokens);
    else out.append("null");
    appendField(out, "ttfb_ms");
    if (r.ttfb_seconds < 0) out.append("null");
    else appendMillis(out, std::llround(r.ttfb_seconds * 1e6));
    appendField(out, "duration_ms");
    appendMillis(out, std::chrono::duration_cast<std::chrono::microseconds>(now - r.started).count());
    appendField(out, "bytes_in");
    appendInteger(out, r.bytes_in);
    appendField(out, "bytes_out");
    appendInteger(out, r.bytes_out);
    appendField(out, "retries");
    appendInteger(out, r.retries);
    appendField(out, "rejection");
    if (r.rejection.empty()) out.append("null");
    else appendJsonString(out, r.rejection);
    if (r.count_mismatch) {
        appendField(out, "count_mismatch");
        out.append("{\"dpgate\":").append(std::to_string(r.count_mismatch->dpgate));
        out.append(",\"backend\":").append(std::to_string(r.count_mismatch->backend)).append("}");
    }
    out.append("}\n");
}

std::shared_ptr<AccessLogSink> AccessLogSink::open(const std::string& target) {
    if (target == "off") return std::shared_ptr<AccessLogSink>(new AccessLogSink(-1, false, target));
    if (target == "stdout") return std::shared_ptr<AccessLogSink>(new AccessLogSink(STDOUT_FILENO, false, target));
    if (target == "stderr") return std::shared_ptr<AccessLogSink>(new AccessLogSink(STDERR_FILENO, false, target));
    int fd = ::open(target.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) throw std::runtime_error("log.access: cannot open " + target + ": " + std::strerror(errno));
    return std::shared_ptr<AccessLogSink>(new AccessLogSink(fd, true, target));
}

AccessLogSink::~AccessLogSink() {
    if (owned_ && fd_ >= 0) ::close(fd_);
}

void AccessLogSink::write(std::string_view lines) {
    while (fd_ >= 0 && !lines.empty()) {
        ssize_t n = ::write(fd_, lines.data(), lines.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // a full disk or a closed pipe must not stop the gateway
        lines.remove_prefix(size_t(n));
    }
}

}  // namespace dpgate::gateway
