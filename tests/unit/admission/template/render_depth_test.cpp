// The renderer's depth bounds, proven on a small stack. Values nested 1,000,
// 100,000 and 1,000,000 levels, built directly (not through JSON), go
// through every walk over values (tojson, str, ==, in, sort, <); templates
// nest and recurse past every bound (blocks, brackets, operator chains,
// macros, caller(), default arguments, filters that run filters). Each runs
// on a thread with 256 KiB of stack ending in a guard page
// (small_stack.hpp): an unbounded recursion crashes the test rather than
// passing on the main thread's 8 MiB by luck. Whatever the depth: the
// answer or a refusal naming the bound, never a crash.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "admission/template/jinja/py_json.hpp"
#include "admission/template/jinja/render.hpp"
#include "admission/template/jinja/template.hpp"
#include "small_stack.hpp"

namespace dpgate::admission::jinja {
namespace {

constexpr std::size_t kStackBytes = 256u << 10;

// 0 inside `depth` lists; with `dicts`, every other level is {"k": ...}.
Value nested(Arena& arena, std::size_t depth, bool dicts = false) {
    Value v = Value::integer(0);
    for (std::size_t i = 0; i < depth; ++i) {
        if (dicts && i % 2 == 1) {
            DictBuilder dict(arena, 1);
            dict.set("k", v);
            v = dict.finish();
        } else {
            ListBuilder list(arena, 1);
            list.push(v);
            v = list.finish();
        }
    }
    return v;
}

struct Outcome {
    bool ok = false;
    std::string text;       // the output, or the error
    std::size_t stack = 0;  // bytes of stack the parse and render used
};

Outcome renderOnSmallStack(Arena& arena, const std::string& source,
                           const std::vector<std::pair<std::string, Value>>& variables = {},
                           const RenderLimits& limits = {}) {
    Outcome outcome;
    outcome.stack = test::runOnSmallStack(kStackBytes, [&] {
        std::string error;
        auto tpl = Template::parse(source, error);
        if (!tpl) {
            outcome.text = "parse: " + error;
            return;
        }
        Renderer renderer(*tpl, arena, limits);
        for (const auto& [name, value] : variables) renderer.setVariable(name, value);
        std::string out;
        if (auto e = renderer.render(out)) {
            outcome.text = e->message;
            return;
        }
        outcome.ok = true;
        outcome.text = out;
    });
    return outcome;
}

std::string repeated(std::string_view text, std::size_t times) {
    std::string out;
    out.reserve(text.size() * times);
    for (std::size_t i = 0; i < times; ++i) out += text;
    return out;
}

// The walks over values, each over `x` and an equal `y` built apart from it.
const std::vector<std::pair<std::string, std::string>> kWalks = {
    {"tojson", "{{ x|tojson|length }}"},
    {"tojson indent", "{{ x|tojson(indent=1)|length }}"},
    {"tojson sort_keys", "{{ x|tojson(sort_keys=true)|length }}"},
    {"str", "{{ x|string|length }}"},
    {"print", "{{ x }}"},
    {"==", "{{ x == y }}"},
    {"!=", "{{ x != y }}"},
    {"in", "{{ x in [0, y] }}"},
    {"count", "{{ [y, 1, x].count(x) }}"},
    {"<", "{{ x < y }}"},
    {"sort", "{{ [y, x, y]|sort|length }}"},
    {"max", "{{ [y, x]|max|length }}"},
    {"dict key", "{{ {(x,): 1}|length }}"},
};

TEST(RenderDepth, ValuesAtTheDepthLimitRender) {
    for (const bool dicts : {false, true}) {
        Arena arena;
        const Value x = nested(arena, kMaxValueDepth, dicts);
        const Value y = nested(arena, kMaxValueDepth, dicts);
        for (const auto& [walk, source] : kWalks) {
            if (dicts && (walk == "<" || walk == "sort" || walk == "max")) continue;  // dicts do not order
            const Outcome r = renderOnSmallStack(arena, source, {{"x", x}, {"y", y}});
            if (walk == "dict key") {  // a tuple holding a list is unhashable, as in Python
                EXPECT_EQ(r.text, dicts ? "unhashable type: 'dict'" : "unhashable type: 'list'");
                continue;
            }
            EXPECT_TRUE(r.ok) << walk << (dicts ? " (dicts)" : "") << ": " << r.text;
            std::printf("%-18s %-7s depth %zu: %zu bytes of stack\n", walk.c_str(), dicts ? "dicts" : "lists",
                        kMaxValueDepth, r.stack);
        }
        EXPECT_EQ(
            renderOnSmallStack(arena, "{{ x == y }}|{{ x in [y] }}|{{ x|tojson|length }}", {{"x", x}, {"y", y}}).text,
            dicts ? "True|True|" + std::to_string(kMaxValueDepth / 2 * 2 + kMaxValueDepth / 2 * 7 + 1)
                  : "True|True|" + std::to_string(2 * kMaxValueDepth + 1));
    }
    // The request's JSON depth limit admits at most 1,000 levels: with the
    // template's own nesting on top, they render.
    Arena arena;
    const Value request = nested(arena, 1000, true);
    const Outcome r =
        renderOnSmallStack(arena, "{{ {'a': [x]}|tojson(indent=2)|length > 0 }}|{{ x == x }}", {{"x", request}});
    EXPECT_EQ(r.text, "True|True");
}

TEST(RenderDepth, DeeperValuesAreRefusedNotCrashed) {
    for (const std::size_t depth : {kMaxValueDepth + 1, std::size_t{100'000}, std::size_t{1'000'000}}) {
        for (const bool dicts : {false, true}) {
            if (dicts && depth == 1'000'000) continue;  // 90 MB of arena for nothing new
            Arena arena;
            const Value x = nested(arena, depth, dicts);
            const Value y = nested(arena, depth, dicts);
            for (const auto& [walk, source] : kWalks) {
                if (dicts && (walk == "<" || walk == "sort" || walk == "max")) continue;
                const Outcome r = renderOnSmallStack(arena, source, {{"x", x}, {"y", y}});
                ASSERT_FALSE(r.ok) << walk << " depth " << depth << " rendered " << r.text.substr(0, 100);
                if (walk == "dict key") {
                    EXPECT_EQ(r.text,
                              std::string("unhashable type: '") + (dicts && depth % 2 == 0 ? "dict" : "list") + "'");
                    continue;
                }
                EXPECT_NE(r.text.find("maximum recursion depth exceeded"), std::string::npos) << walk << ": " << r.text;
                EXPECT_NE(r.text.find("1024 levels"), std::string::npos) << walk << ": " << r.text;
            }
        }
    }
    // A deep tuple as a dict key: hashing it stops at the bound too.
    Arena arena;
    Value tuple = Value::integer(0);
    for (int i = 0; i < 100'000; ++i) {
        ListBuilder list(arena, 1);
        list.push(tuple);
        tuple = list.finish(true);
    }
    const Outcome r = renderOnSmallStack(arena, "{{ {x: 1} }}", {{"x", tuple}});
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.text.find("maximum recursion depth exceeded"), std::string::npos) << r.text;
}

// A list holding the same list twice, 60 levels deep: 2^60 elements to
// walk in a few kilobytes of arena. Every walk stops at the work budget.
TEST(RenderDepth, SharedSublistsStopAtTheWorkBudget) {
    Arena arena;
    Value x = Value::integer(0);
    Value y = Value::integer(0);
    for (int i = 0; i < 60; ++i) {
        ListBuilder a(arena, 2);
        a.push(x);
        a.push(x);
        x = a.finish();
        ListBuilder b(arena, 2);
        b.push(y);
        b.push(y);
        y = b.finish();
    }
    RenderLimits limits;
    limits.steps = 1'000'000;
    limits.arena_bytes = 64u << 20;
    for (const char* source : {"{{ x == y }}", "{{ x in [y] }}", "{{ x < y }}", "{{ [x, y]|sort|length }}",
                               "{{ x|tojson|length }}", "{{ x|string|length }}"}) {
        const Outcome r = renderOnSmallStack(arena, source, {{"x", x}, {"y", y}}, limits);
        EXPECT_FALSE(r.ok) << source;
        const bool named = r.text.find("steps") != std::string::npos || r.text.find("bytes") != std::string::npos;
        EXPECT_TRUE(named) << source << ": " << r.text;
    }
}

TEST(RenderDepth, TemplatesNestAtMostTheParsersBound) {
    Arena arena;
    const std::size_t limit = kMaxTemplateNesting;
    // The template body is one level; each `if` one more.
    auto ifs = [](std::size_t n) { return repeated("{% if true %}", n) + "x" + repeated("{% endif %}", n); };
    EXPECT_EQ(renderOnSmallStack(arena, ifs(limit - 1)).text, "x");
    const std::string too_deep = "the template nests more than " + std::to_string(limit) + " levels deep";
    EXPECT_NE(renderOnSmallStack(arena, ifs(limit)).text.find(too_deep), std::string::npos);
    // The innermost loop's `[1]` is two levels more (an expression, a list).
    auto fors = [](std::size_t n) { return repeated("{% for a in [1] %}", n) + "x" + repeated("{% endfor %}", n); };
    EXPECT_EQ(renderOnSmallStack(arena, fors(limit - 2)).text, "x");
    EXPECT_NE(renderOnSmallStack(arena, fors(limit - 1)).text.find(too_deep), std::string::npos);
    // {{ }} holds an expression: one level, and one per bracket.
    auto parens = [](std::size_t n) { return "{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}"; };
    EXPECT_EQ(renderOnSmallStack(arena, parens(limit - 2)).text, "1");
    EXPECT_NE(renderOnSmallStack(arena, parens(limit - 1)).text.find(too_deep), std::string::npos);

    const std::vector<std::pair<std::string, std::string>> deep = {
        {"10,000 nested ifs", ifs(10'000)},
        {"10,000 nested fors", fors(10'000)},
        {"10,000 nested macros", repeated("{% macro m() %}", 10'000) + repeated("{% endmacro %}", 10'000)},
        {"10,000 nested call blocks", "{% macro m() %}{{ caller() }}{% endmacro %}" +
                                          repeated("{% call m() %}", 10'000) + repeated("{% endcall %}", 10'000)},
        {"10,000 nested set blocks", repeated("{% set a %}", 10'000) + repeated("{% endset %}", 10'000)},
        {"100,000 parentheses", parens(100'000)},
        {"100,000 brackets", "{{ " + std::string(100'000, '[') + std::string(100'000, ']') + " }}"},
        {"100,000 braces", "{{ " + repeated("{'a': ", 100'000) + "1" + std::string(100'000, '}') + " }}"},
        {"100,000 nots", "{{ " + repeated("not ", 100'000) + "1 }}"},
        {"100,000 minus signs", "{{ " + std::string(100'000, '-') + "1 }}"},
        {"100,000 additions", "{{ 1" + repeated(" + 1", 100'000) + " }}"},
        {"100,000 ands", "{{ 1" + repeated(" and 1", 100'000) + " }}"},
        {"100,000 powers", "{{ 1" + repeated(" ** 1", 100'000) + " }}"},
        {"100,000 inline ifs", "{{ 1" + repeated(" if 1 else 1", 100'000) + " }}"},
        {"100,000 filters", "{{ 1" + repeated("|string", 100'000) + " }}"},
        {"100,000 subscripts", "{{ x" + repeated("[0]", 100'000) + " }}"},
        {"100,000 attributes", "{{ x" + repeated(".a", 100'000) + " }}"},
        {"100,000 calls", "{{ x" + repeated("()", 100'000) + " }}"},
        {"100,000 nested arguments", "{{ " + repeated("x(", 100'000) + std::string(100'000, ')') + " }}"},
        {"100,000 nested targets",
         "{% for " + std::string(100'000, '(') + "a" + std::string(100'000, ')') + " in [] %}{% endfor %}"},
    };
    for (const auto& [name, source] : deep) {
        const Outcome r = renderOnSmallStack(arena, source);
        EXPECT_FALSE(r.ok) << name;
        EXPECT_NE(r.text.find(too_deep), std::string::npos) << name << ": " << r.text;
        std::printf("%-28s %zu bytes of stack\n", name.c_str(), r.stack);
    }
}

TEST(RenderDepth, MacroRecursionStopsAtItsBound) {
    Arena arena;
    auto recursion = [](std::size_t calls) {
        return "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}.{% endmacro %}{{ f(" +
               std::to_string(calls - 1) + ") }}";
    };
    const Outcome at_limit = renderOnSmallStack(arena, recursion(kMaxMacroDepth));
    EXPECT_EQ(at_limit.text, std::string(kMaxMacroDepth, '.'));
    std::printf("%u macro calls deep: %zu bytes of stack\n", kMaxMacroDepth, at_limit.stack);
    const std::string refused = "maximum recursion depth exceeded in macro calls (the chat template may nest at most " +
                                std::to_string(kMaxMacroDepth) + " macro calls)";
    EXPECT_EQ(renderOnSmallStack(arena, recursion(kMaxMacroDepth + 1)).text, refused);
    EXPECT_EQ(renderOnSmallStack(arena, recursion(100'000)).text, refused);

    const std::vector<std::pair<std::string, std::string>> recursions = {
        {"caller bodies",
         "{% macro g() %}{{ caller() }}{% endmacro %}"
         "{% macro f(n) %}{% call g() %}{{ f(n - 1) }}{% endcall %}{% endmacro %}{{ f(100000) }}"},
        {"default arguments", "{% macro f(n, x=f(n - 1)) %}{{ x }}{% endmacro %}{{ f(100000) }}"},
        {"macros through filters",
         "{% macro f(n) %}{{ [n]|map('string')|join }}{{ f(n - 1) }}{% endmacro %}"
         "{{ f(100000) }}"},
        {"macros in loops",
         "{% macro f(n) %}{% for i in [n] %}{% set s %}{{ f(i - 1) }}{% endset %}{{ s }}"
         "{% endfor %}{% endmacro %}{{ f(100000) }}"},
        {"macros called by name",
         "{% set ns = namespace(f=none) %}{% macro f(n) %}{{ ns.f(n - 1) }}{% endmacro %}"
         "{% set ns.f = f %}{{ f(100000) }}"},
    };
    for (const auto& [name, source] : recursions) {
        const Outcome r = renderOnSmallStack(arena, source);
        EXPECT_FALSE(r.ok) << name;
        const bool named = r.text.find("maximum recursion depth exceeded in macro calls") != std::string::npos ||
                           r.text.find("levels deep") != std::string::npos;
        EXPECT_TRUE(named) << name << ": " << r.text;
        std::printf("%-24s %zu bytes of stack: %s\n", name.c_str(), r.stack, r.text.c_str());
    }
}

// Each call deeper opens many levels at once: the nesting bound stops it
// before the macro bound does, and before the stack runs out.
TEST(RenderDepth, RenderNestingStopsAtItsBound) {
    Arena arena;
    const std::string body = repeated("{% if true %}{% for i in [1] %}", 8) + "{{ (f(n - 1) if n > 0) ~ '' }}" +
                             repeated("{% endfor %}{% endif %}", 8);
    const Outcome r = renderOnSmallStack(arena, "{% macro f(n) %}" + body + "{% endmacro %}{{ f(90) }}");
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.text, "the chat template nests more than " + std::to_string(kMaxRenderNesting) +
                          " levels deep (statements, expressions and calls) to render this request");
    std::printf("%u levels: %zu bytes of stack\n", kMaxRenderNesting, r.stack);
    // Filters that run filters: map('map', 'map', ...) over a deep list, the
    // names from the request.
    ListBuilder names(arena);
    for (int i = 0; i < 100'000; ++i) names.push(Value::string("map"));
    const Outcome filters = renderOnSmallStack(arena, "{{ x|map(*names)|list }}",
                                               {{"x", nested(arena, 100'000)}, {"names", names.finish()}});
    EXPECT_FALSE(filters.ok);
    EXPECT_NE(filters.text.find("levels deep"), std::string::npos) << filters.text;
}

TEST(RenderDepth, JsonLoadsOfAnyDepthFailsWithoutRecursing) {
    for (const std::size_t depth : {std::size_t{100'000}, std::size_t{1'000'000}}) {
        for (const char* open : {"[", "{\"a\":"}) {
            const std::string text = repeated(open, depth);
            bool too_deep = false;
            const std::size_t stack = test::runOnSmallStack(kStackBytes, [&] {
                Arena arena;
                Value v;
                const auto error = pyJsonLoads(text, arena, v);
                too_deep = error && error->too_deep;
            });
            EXPECT_TRUE(too_deep) << open << " x " << depth;
            EXPECT_LT(stack, kStackBytes * test::kStackScale);
        }
    }
    // At the bound, a document loads and dumps back.
    const std::string at_limit = std::string(kJsonMaxDepth, '[') + std::string(kJsonMaxDepth, ']');
    Arena arena;
    Value v;
    ASSERT_FALSE(pyJsonLoads(at_limit, arena, v));
    std::string back;
    ASSERT_FALSE(pyJsonDumps(v, {}, back));
    EXPECT_EQ(back, at_limit);
}

}  // namespace
}  // namespace dpgate::admission::jinja
