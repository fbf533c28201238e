// Feeds arbitrary bytes to mergeBackendPages as up to four backends' /metrics
// pages (split at NUL bytes; an empty piece is a backend that could not be
// fetched). The contract: no crash, no exception; the same answer twice and
// with CRLF line ends; every line counted once at most; and what it writes
// reads back as written: merged again as one page, every sample is kept and
// only dpgate's own up gauge (its HELP, TYPE and one sample per page) is
// skipped. That last check is left out when the input has a label its
// renaming would touch (a `backend` of its own).
#include "gateway/metrics/merge_backend_pages.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

using dpgate::metrics::BackendPage;
using dpgate::metrics::mergeBackendPages;
using dpgate::metrics::MergedPages;
using dpgate::metrics::MergeLimits;

namespace {

constexpr std::string_view kNames[] = {"a", "b-2", "c.3", "d_4"};

// Small bounds, so the fuzzer reaches them.
MergeLimits smallLimits() {
    MergeLimits limits;
    limits.max_line_bytes = 4096;
    limits.max_labels = 8;
    limits.max_samples_per_page = 2000;
    limits.max_families = 200;
    return limits;
}

std::vector<BackendPage> split(std::string_view input) {
    std::vector<BackendPage> pages;
    while (pages.size() < std::size(kNames)) {
        const size_t nul = input.find('\0');
        const std::string_view piece = input.substr(0, nul);
        BackendPage page{kNames[pages.size()], std::nullopt};
        if (!piece.empty()) page.text = piece;
        pages.push_back(page);
        if (nul == std::string_view::npos) break;
        input.remove_prefix(nul + 1);
    }
    return pages;
}

bool sameCounts(const MergedPages& a, const MergedPages& b) {
    if (a.pages.size() != b.pages.size()) return false;
    for (size_t i = 0; i < a.pages.size(); ++i)
        if (a.pages[i].samples != b.pages[i].samples || a.pages[i].skipped != b.pages[i].skipped) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const MergeLimits limits = smallLimits();
    const std::vector<BackendPage> pages = split(input);
    const MergedPages merged = mergeBackendPages(pages, limits);

    size_t samples = 0;
    for (size_t i = 0; i < pages.size(); ++i) {
        const auto& count = merged.pages[i];
        size_t lines = 0;
        if (pages[i].text) {
            lines = 1;
            for (char c : *pages[i].text) lines += c == '\n';
        }
        if (count.samples + count.skipped > lines || count.samples > limits.max_samples_per_page) __builtin_trap();
        samples += count.samples;
    }
    const MergedPages again = mergeBackendPages(pages, limits);
    if (again.text != merged.text || !sameCounts(again, merged)) __builtin_trap();

    if (input.find('\r') == std::string_view::npos) {
        std::string crlf;
        crlf.reserve(size + size / 8);
        for (char c : input) {
            if (c == '\n') crlf += '\r';
            crlf += c;
        }
        const MergedPages from_crlf = mergeBackendPages(split(crlf), limits);
        if (from_crlf.text != merged.text || !sameCounts(from_crlf, merged)) __builtin_trap();
    }

    if (input.find("backend") == std::string_view::npos) {
        MergeLimits roomy = limits;
        roomy.max_line_bytes += 128;  // the backend label added to a line
        roomy.max_labels += 1;
        roomy.max_samples_per_page = std::numeric_limits<size_t>::max();
        const BackendPage whole{"z", std::string_view(merged.text)};
        const MergedPages reread = mergeBackendPages({&whole, 1}, roomy);
        if (reread.pages[0].samples != samples || reread.pages[0].skipped != 2 + pages.size()) __builtin_trap();
    }
    return 0;
}
