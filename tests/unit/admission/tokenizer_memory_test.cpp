// What counting costs in memory, counted exactly: this executable replaces
// the global operator new (every heap byte the tokenizer asks for, by
// malloc_usable_size) and reads MappedAllocator's own count of the blocks it
// maps. A count of any text may use at most 20 bytes per input byte at its
// peak, and what stays allocated after it must not grow with the text: a
// worker keeps its counter for ever. Its own executable: the replaced
// operator new would count every other test's allocations too.
#include <malloc.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <string>

#include "admission/tokenizer/mapped_allocator.hpp"
#include "admission/tokenizer/token_counter.hpp"
#include "test_support.hpp"

namespace {

std::atomic<std::size_t> heap_bytes{0};
std::atomic<std::size_t> peak_heap_bytes{0};

void* counted(void* p) {
    if (p == nullptr) return nullptr;
    const std::size_t size = ::malloc_usable_size(p);
    const std::size_t now = heap_bytes.fetch_add(size, std::memory_order_relaxed) + size;
    std::size_t peak = peak_heap_bytes.load(std::memory_order_relaxed);
    while (now > peak && !peak_heap_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    return p;
}

void uncounted(void* p) {
    if (p == nullptr) return;
    heap_bytes.fetch_sub(::malloc_usable_size(p), std::memory_order_relaxed);
    std::free(p);
}

void* allocate(std::size_t size) {
    void* p = counted(std::malloc(size == 0 ? 1 : size));
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

void* allocateAligned(std::size_t size, std::align_val_t align) {
    const auto a = static_cast<std::size_t>(align);
    void* p = counted(std::aligned_alloc(a, (size + a - 1) / a * a));
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted(std::malloc(size ? size : 1)); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted(std::malloc(size ? size : 1)); }
void* operator new(std::size_t size, std::align_val_t align) { return allocateAligned(size, align); }
void* operator new[](std::size_t size, std::align_val_t align) { return allocateAligned(size, align); }
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }

namespace dpgate::admission {
namespace {

std::string repeat(std::string_view unit, std::size_t bytes) {
    std::string out;
    while (out.size() < bytes) out += unit;
    return out;
}

struct Usage {
    std::size_t peak;  // above the start, heap and mapped peaks added (an upper bound of their sum's)
    std::size_t kept;  // above the start, after the count
};

// One count of `text` by `counter`, measured.
Usage measure(TokenCounter& counter, const std::string& text) {
    const std::size_t heap_before = heap_bytes.load();
    const std::size_t mapped_before = mappedBytes();
    peak_heap_bytes.store(heap_before);
    resetPeakMappedBytes();
    EXPECT_TRUE(counter.count(text).ok);
    return {peak_heap_bytes.load() - heap_before + peakMappedBytes() - mapped_before,
            heap_bytes.load() + mappedBytes() - heap_before - mapped_before};
}

TEST(TokenizerMemory, EveryClassOfLongTextCountsInTwentyBytesPerByteAndKeepsNothing) {
    // With DPGATE_PLAIN=bpe_rank_sweep long pieces merge through the heap,
    // the rank sweep's plain twin, which keeps ~20 bytes a symbol in four
    // buffers grown by doubling: 24 per byte here, so 28 is its bound.
    const std::size_t per_byte = fastPathOn(FastPath::bpe_rank_sweep) ? 20 : 28;
    const auto tokenizer = test::referenceTokenizer();
    ASSERT_NE(tokenizer, nullptr);
    constexpr std::size_t kBytes = std::size_t{2} << 20;
    std::mt19937_64 rng(20);
    std::string random_word(kBytes, ' ');
    for (char& c : random_word) c = static_cast<char>('a' + rng() % 26);
    std::string runs_in_text;
    while (runs_in_text.size() < kBytes)
        runs_in_text += "Some prose, then a run:" + repeat(rng() % 2 ? "-" : "a", 100000 + rng() % 200000) + "\n";
    std::string pieces_of_one_byte;  // a digit, a letter: one piece each
    while (pieces_of_one_byte.size() < kBytes) pieces_of_one_byte += "1a";
    const std::pair<const char*, std::string> texts[] = {
        {"letters", repeat("a", kBytes)},       {"spaces", repeat(" ", kBytes)}, {"newlines", repeat("\n", kBytes)},
        {"punctuation", repeat("!", kBytes)},   {"cjk", repeat("你", kBytes)},   {"emoji", repeat("😀", kBytes)},
        {"abab", repeat("ab", kBytes)},         {"random word", random_word},    {"runs in text", runs_in_text},
        {"one-byte pieces", pieces_of_one_byte}};
    for (const auto& [name, text] : texts) {
        // The counter a worker keeps: made once, then counting for ever.
        TokenCounter counter(tokenizer);
        const Usage first = measure(counter, text);
        EXPECT_LE(first.peak, per_byte * text.size()) << name << ": " << first.peak / text.size() << " bytes per byte";
        // The count's own buffers are gone; what stays is the segment cache's
        // entry and buffers no larger than an ordinary text needs.
        EXPECT_LE(first.kept, std::size_t{1} << 20) << name;
        EXPECT_LE(Tokenizer::scratchBytes(), std::size_t{512} << 10) << name;
    }
}

}  // namespace
}  // namespace dpgate::admission
