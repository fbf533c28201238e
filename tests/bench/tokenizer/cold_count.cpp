// dpgate-bench-cold-count FILE TOKENIZER_DIR: one first-contact count in this
// fresh process (load, then a fresh counter over FILE in 16 KB chunks, no
// segment cache); prints the counting thread's CPU ms and the tokens. It uses
// only the tokenizer's oldest interface, so the same file compiled against
// an older checkout gives before/after figures in one run
// (docs/BENCHMARKS.md).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "admission/tokenizer/token_counter.hpp"

namespace {
double threadCpuMs() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}
}  // namespace

int main(int argc, char** argv) {
    using namespace dpgate::admission;
    if (argc != 3) {
        std::fprintf(stderr, "usage: dpgate-bench-cold-count FILE TOKENIZER_DIR\n");
        return 2;
    }
    const auto tokenizer = Tokenizer::load(argv[2]).tokenizer;
    if (!tokenizer) return 1;
    std::ifstream in(argv[1], std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string_view> parts;
    for (std::size_t start = 0; start < text.size();) {
        std::size_t end = std::min(start + 16384, text.size());
        while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
        parts.push_back(std::string_view(text).substr(start, end - start));
        start = end;
    }
    const double t0 = threadCpuMs();
    TokenCounterLimits limits;
    limits.min_cached_segment_bytes = static_cast<std::size_t>(-1);
    TokenCounter counter(tokenizer, limits);
    unsigned long long tokens = 0;
    for (const auto part : parts) tokens += counter.count(part).tokens;
    std::printf("%.2f %llu\n", threadCpuMs() - t0, tokens);
    return 0;
}
