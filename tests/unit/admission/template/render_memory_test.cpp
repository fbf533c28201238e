// The 104 KB request that made a chat template's tojson(indent=...) grow to
// 3.8 GB and end in bad_alloc (a 500): a 400 naming the bound, with the
// heap never holding more than a few times the request's render budget. Its own
// binary (CMakeLists.txt): it counts every heap allocation of the process,
// through the operator new below, and refuses past kHeapCap so that a
// regression fails here instead of taking the machine's memory.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <variant>

#include "admission/admit.hpp"
#include "test_support.hpp"

namespace {

constexpr std::size_t kHeapCap = std::size_t{2} << 30;

std::atomic<std::size_t> g_live_bytes{0};
std::atomic<std::size_t> g_peak_bytes{0};

void* counted(std::size_t size, std::size_t align) {
    void* p = align <= alignof(std::max_align_t) ? std::malloc(size == 0 ? 1 : size)
                                                 : std::aligned_alloc(align, (size + align - 1) / align * align);
    if (p == nullptr) return nullptr;
    const std::size_t live = g_live_bytes.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
    std::size_t peak = g_peak_bytes.load();
    while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
    }
    if (live > kHeapCap) {
        g_live_bytes.fetch_sub(malloc_usable_size(p));
        std::free(p);
        return nullptr;
    }
    return p;
}

void uncounted(void* p) {
    if (p == nullptr) return;
    g_live_bytes.fetch_sub(malloc_usable_size(p));
    std::free(p);
}

}  // namespace

void* operator new(std::size_t size) {
    if (void* p = counted(size, 0)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, std::align_val_t align) {
    if (void* p = counted(size, static_cast<std::size_t>(align))) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t align) { return operator new(size, align); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted(size, 0); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted(size, 0); }
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

// The golden tools template prints a tool call's arguments with
// tojson(indent=tool_json_indent), a template kwarg: a 104 KB body sets it
// to 100 KB of spaces beside arguments nested 200 levels, a dump that
// repeats the indent 40,000 times (4 GB).
TEST(RenderMemory, TojsonIndentOfARequestValueIsA400WithinTheBudget) {
    std::string error;
    ChatTemplate::LoadOptions options;
    options.tokenizer = test::tokenizerDir();
    options.chat_template = test::goldenDir() / "templates/deepseek_tools.jinja";
    const auto chat_template = ChatTemplate::load(options, error);
    ASSERT_NE(chat_template, nullptr) << error;
    const std::string body = R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":"hi"},)"
                             R"({"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function",)"
                             R"("function":{"name":"f","arguments":{"a":)" +
                             std::string(200, '[') + "0" + std::string(200, ']') +
                             R"(}}}]},{"role":"tool","tool_call_id":"c","content":"r"}],)"
                             R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],)"
                             R"("chat_template_kwargs":{"tool_json_indent":")" +
                             std::string(103'000, ' ') + R"("}})";
    ASSERT_GT(body.size(), 103'000u);
    ASSERT_LT(body.size(), 105'000u);
    Admitter admitter(test::referenceTokenizer(), chat_template);
    AdmissionLimits limits;
    const std::size_t before = g_live_bytes.load();
    g_peak_bytes.store(before);
    const Verdict verdict = admitter.admit(body, Endpoint::chat_completions, limits);
    const std::size_t peak = g_peak_bytes.load() - before;

    ASSERT_TRUE(std::holds_alternative<Refused>(verdict));
    const Refused& refused = std::get<Refused>(verdict);
    EXPECT_EQ(refused.http_status, 400u);
    EXPECT_EQ(refused.type, "invalid_request_error");
    EXPECT_EQ(refused.param, "messages");
    const jinja::RenderLimits budget = jinja::RenderLimits::forRequest(body.size());
    EXPECT_EQ(refused.message, "the chat template's output would exceed " + std::to_string(budget.arena_bytes) +
                                   " bytes (tojson indent)");
    // The arena's budget and the text held outside it (the dump and its
    // growth, the indent), with room for the scan's and the tokenizer's
    // own buffers.
    EXPECT_LT(peak, 3 * budget.arena_bytes + (16u << 20)) << peak;
    std::printf("heap high-water mark: %zu bytes (render budget %zu)\n", peak, budget.arena_bytes);

    // The worker is not spoiled: the next request renders, indented.
    const Verdict next = admitter.admit(
        R"({"model":"ds-v4.1-flash-1017","messages":[{"role":"user","content":"hi"},)"
        R"({"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function",)"
        R"("function":{"name":"f","arguments":{"a":[1]}}}]},{"role":"tool","tool_call_id":"c","content":"r"}],)"
        R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],)"
        R"("chat_template_kwargs":{"tool_json_indent":2}})",
        Endpoint::chat_completions, limits);
    EXPECT_TRUE(std::holds_alternative<Admitted>(next));
}

}  // namespace
}  // namespace dpgate::admission
