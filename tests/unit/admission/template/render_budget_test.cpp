// The renderer's budgets (RenderLimits): each at its limit renders, one
// byte or step over is refused with a message naming what was exceeded.
// Text whose size a request controls (tojson and indent widths, repetition,
// padding, joins, replacements, format widths) is sized against the arena's
// room before it is built; work the request controls (loops, scans, walks
// over values) is charged to the step budget as it goes.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "admission/template/jinja/py_json.hpp"
#include "admission/template/jinja/render.hpp"
#include "admission/template/jinja/template.hpp"

namespace dpgate::admission::jinja {
namespace {

struct Rendered {
    bool ok = false;
    bool limit = false;      // a RenderLimits bound stopped it
    std::string text;        // output or error
    std::size_t growth = 0;  // bytes the render added to the arena
};

std::string repeated(std::string_view text, std::size_t times) {
    std::string out;
    for (std::size_t i = 0; i < times; ++i) out += text;
    return out;
}

// "k0":0,"k1":1,...: `n` entries for a JSON object.
std::string keys(std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += (i > 0 ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
    return out;
}

// "1,1,...,1": `n` numbers for a JSON list.
std::string ones(std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += i > 0 ? ",1" : "1";
    return out;
}

Rendered render(const std::string& source, const std::string& context_json, const RenderLimits& limits) {
    std::string error;
    auto tpl = Template::parse(source, error);
    if (!tpl) return {false, false, "parse: " + error};
    Arena arena;
    Value context;
    if (auto e = pyJsonLoads(context_json, arena, context)) return {false, false, "context: " + e->message};
    Renderer renderer(*tpl, arena, limits);
    for (std::size_t i = 0; i < context.asDict().size; ++i) {
        renderer.setVariable(context.asDict().keys[i].text(), context.asDict().values[i]);
    }
    const std::size_t before = arena.bytesUsed();
    std::string out;
    Rendered r;
    if (auto e = renderer.render(out)) {
        r.text = e->message;
        r.limit = e->limit;
    } else {
        r.ok = true;
        r.text = out;
    }
    r.growth = arena.bytesUsed() - before;
    return r;
}

// Text the request sizes: at exactly the bytes it needs it renders, one byte
// less is refused before the text is built, naming the operation.
TEST(RenderBudget, RequestSizedTextStopsAtTheArenasRoom) {
    struct Case {
        std::string source;
        std::string context;
        std::string refusal;  // the end of the message with half the bytes
    };
    const std::string deep = std::string(200, '[') + std::string(200, ']');
    const std::vector<Case> cases = {
        {"{{ x|tojson(indent=n) }}", R"({"x": )" + deep + R"(, "n": 40})", "(tojson indent)"},
        {"{{ x|tojson(indent=n) }}", R"({"x": )" + deep + R"(, "n": ")" + repeated("\\t", 40) + R"("})",
         "(tojson indent)"},
        {"{{ x|tojson(separators=[s, ':']) }}", R"({"x": [)" + ones(2000) + R"(], "s": ",         "})",
         "(tojson separators)"},
        {"{{ x|tojson }}", R"({"x": [")" + std::string(20000, 'a') + R"("]})", "(tojson)"},
        {"{{ x|indent(n) }}", R"({"x": ")" + repeated("a\\n", 1000) + R"(", "n": 1000})", "(indent)"},
        {"{{ x|indent(n, true, true) }}", R"({"x": "a\nb\n\nc", "n": 100000})", "(indent)"},
        {"{{ x|center(n) }}", R"({"x": "a", "n": 100000})", "(center)"},
        {"{{ x.ljust(n) }}", R"({"x": "a", "n": 100000})", "(padding)"},
        {"{{ x.zfill(n) }}", R"({"x": "1", "n": 100000})", "(padding)"},
        {"{{ ('{:>' ~ n ~ '}').format(x) }}", R"({"x": "a", "n": 100000})", "(format width)"},
        {"{{ x|join(s) }}", R"({"x": [)" + ones(2000) + R"(], "s": ")" + std::string(100, '-') + R"("})", "(join)"},
        {"{{ s.join(x) }}", R"({"x": ["a", "b", "c", "d"], "s": ")" + std::string(30000, '-') + R"("})", "(join)"},
        {"{{ x.replace('a', s) }}",
         R"({"x": ")" + std::string(100, 'a') + R"(", "s": ")" + std::string(1000, 'b') + R"("})", "(replace)"},
        {"{{ x|replace('a', s) }}",
         R"({"x": ")" + std::string(100, 'a') + R"(", "s": ")" + std::string(1000, 'b') + R"("})", "(replace)"},
        {"{% set y = x ~ x ~ x ~ x %}{{ y|length }}", R"({"x": ")" + std::string(50000, 'a') + R"("})", "(~)"},
        {"{{ x|e }}", R"({"x": ")" + std::string(20000, '<') + R"("})", "(escape)"},
        {"{{ x|string|length }}", R"({"x": [)" + ones(20000) + R"(, "abc", [1, 2, {"a": null}]]})", "(repr)"},
        {"{{ x * n }}", R"({"x": "ab", "n": 50000})", "to render this request"},
        {"{{ (x * n)|length }}", R"({"x": [1, 2], "n": 5000})", "(list repetition)"},
        {"{{ x|batch(n, 0)|list|length }}", R"({"x": [1], "n": 50000})", "(batch)"},
    };
    for (const Case& c : cases) {
        const Rendered free = render(c.source, c.context, {});
        ASSERT_TRUE(free.ok) << c.source << ": " << free.text;
        RenderLimits exact;
        exact.arena_bytes = free.growth;
        const Rendered at_limit = render(c.source, c.context, exact);
        EXPECT_TRUE(at_limit.ok) << c.source << " at " << free.growth << " bytes: " << at_limit.text;
        EXPECT_EQ(at_limit.text, free.text) << c.source;
        RenderLimits under = exact;
        under.arena_bytes = free.growth - 1;
        const Rendered refused = render(c.source, c.context, under);
        EXPECT_FALSE(refused.ok) << c.source;
        EXPECT_TRUE(refused.limit) << c.source;
        EXPECT_NE(refused.text.find(std::to_string(free.growth - 1) + " bytes"), std::string::npos)
            << c.source << ": " << refused.text;
        // With half the room, the big text itself is what does not fit.
        under.arena_bytes = free.growth / 2;
        const Rendered half = render(c.source, c.context, under);
        EXPECT_FALSE(half.ok) << c.source;
        EXPECT_EQ(half.text.substr(half.text.size() - std::min(half.text.size(), c.refusal.size())), c.refusal)
            << c.source << ": " << half.text;
    }
}

// A width, an indent or a count past any budget is refused at once, before
// anything of that size is allocated (Python would try and raise MemoryError).
TEST(RenderBudget, HugeWidthsAreRefusedBeforeAllocating) {
    RenderLimits limits = RenderLimits::forRequest(1000);
    const std::string exceed = "would exceed " + std::to_string(limits.arena_bytes) + " bytes";
    for (const char* source : {
             "{{ [1]|tojson(indent=1000000000000) }}",
             "{{ [1]|tojson(indent=100000000000000000000000) }}",
             "{{ 'a\nb'|indent(1000000000000) }}",
             "{{ 'a'|center(1000000000000) }}",
             "{{ 'a'.rjust(9223372036854775807) }}",
             "{{ '{:>1000000000000}'.format('a') }}",
             "{{ [1]|batch(1000000000000, 0)|list }}",
             "{{ ([1] * 1000000000)|length }}",
         }) {
        const Rendered r = render(source, "{}", limits);
        EXPECT_FALSE(r.ok) << source;
        EXPECT_NE(r.text.find(exceed), std::string::npos) << source << ": " << r.text;
    }
    // Without a fill value, a huge batch size makes one short row at once.
    EXPECT_EQ(render("{{ [1, 2]|batch(1000000000000)|list }}", "{}", limits).text, "[[1, 2]]");
}

TEST(RenderBudget, ThePromptAndItsCapturesStopAtTheOutputLimit) {
    const std::string source = "{% for i in range(1000) %}{{ x }}{% endfor %}";
    const std::string context = R"({"x": "0123456789"})";
    RenderLimits limits;
    limits.output_bytes = 10'000;
    const Rendered at_limit = render(source, context, limits);
    EXPECT_TRUE(at_limit.ok) << at_limit.text;
    EXPECT_EQ(at_limit.text.size(), 10'000u);
    limits.output_bytes = 9'999;
    EXPECT_EQ(render(source, context, limits).text, "the rendered prompt would exceed 9999 bytes");
    // Text captured by a macro, a caller or a block set counts while it is
    // being built, beside the prompt so far.
    limits.output_bytes = 10'009;
    const std::string captured = "{{ x }}{% set s %}" + source + "{% endset %}";
    EXPECT_EQ(render(captured, context, limits).text, "the rendered prompt would exceed 10009 bytes");
    limits.output_bytes = 10'010;
    EXPECT_TRUE(render(captured, context, limits).ok);
    const std::string nested =
        "{% macro m() %}{{ x }}{{ caller() }}{% endmacro %}{% call m() %}" + source + "{% endcall %}";
    limits.output_bytes = 10'009;
    EXPECT_EQ(render(nested, context, limits).text, "the rendered prompt would exceed 10009 bytes");
    limits.output_bytes = 10'010;
    EXPECT_TRUE(render(nested, context, limits).ok);
}

TEST(RenderBudget, StepsStopLoopsAndScans) {
    // A statement and each iteration are a step each.
    RenderLimits limits;
    limits.steps = 1001;
    EXPECT_TRUE(render("{% for i in range(1000) %}{% endfor %}", "{}", limits).ok);
    EXPECT_EQ(render("{% for i in range(1001) %}{% endfor %}", "{}", limits).text,
              "the chat template took more than 1001 steps to render this request");
    // range() is bounded (Python's sandbox: 100,000), nested loops by the steps.
    const RenderLimits request = RenderLimits::forRequest(1000);
    EXPECT_EQ(
        render("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", "{}", request)
            .text,
        "the chat template took more than " + std::to_string(request.steps) + " steps to render this request");
    EXPECT_NE(render("{% for i in range(10**12) %}{% endfor %}", "{}", request).text.find("Range too big"),
              std::string::npos);
    // Work without allocation is charged by what it scans: searches through
    // 1 MB of text, comparisons of long strings and lists, in a loop; a
    // namespace made of 100,000 names (each looked up among the others).
    const std::string text = R"({"s": ")" + std::string(1'000'000, 'a') + R"(", "t": ")" + std::string(1'000'000, 'a') +
                             R"(", "l": [)" + ones(100'000) + R"(], "m": [)" + ones(100'000) + R"(], "d": {)" +
                             keys(100'000) + "}}";
    const RenderLimits for_text = RenderLimits::forRequest(text.size());
    for (const char* source : {"{% for i in range(100000) %}{% if 'b' in s %}{% endif %}{% endfor %}",
                               "{% for i in range(100000) %}{% if s.count('b') %}{% endif %}{% endfor %}",
                               "{% for i in range(100000) %}{% if s|length == 0 %}{% endif %}{% endfor %}",
                               "{% for i in range(100000) %}{% if s == t %}{% endif %}{% endfor %}",
                               "{% for i in range(100000) %}{% if s < t %}{% endif %}{% endfor %}",
                               "{% for i in range(100000) %}{% if l == m %}{% endif %}{% endfor %}",
                               "{% for i in range(100000) %}{% if 2 in l %}{% endif %}{% endfor %}",
                               "{% for i in range(100000) %}{% if l|first %}{% endif %}{% endfor %}",
                               "{% for i in range(100000) %}{% if l|select('even')|list %}{% endif %}{% endfor %}",
                               "{% set ns = namespace(d) %}"}) {
        const Rendered r = render(source, text, for_text);
        EXPECT_FALSE(r.ok) << source;
        EXPECT_NE(r.text.find("steps to render this request"), std::string::npos) << source << ": " << r.text;
    }
}

// unique() hashes: 100,000 distinct items are 100,000 lookups, not 5 * 10^9
// comparisons, and render within a request's budget.
TEST(RenderBudget, UniqueIsLinear) {
    std::string items;
    for (int i = 0; i < 100'000; ++i) {
        if (i > 0) items += ',';
        items += std::to_string(i);
    }
    const std::string context = R"({"x": [)" + items + "," + items + R"(, 1.0, true, "1"]})";
    const Rendered r = render("{{ x|unique|list|length }}", context, RenderLimits::forRequest(context.size()));
    EXPECT_EQ(r.text, "100001");  // 1.0 and True are 1; "1" is not
}

// Copies a call keeps while deeper calls run (a list spread as *args, the
// items map() holds while the filter it names runs) count against the room.
TEST(RenderBudget, HeldCopiesCountAgainstTheRoom) {
    const std::string context = R"({"x": [)" + ones(20'000) + "]}";
    RenderLimits limits;
    limits.arena_bytes = 4u << 20;
    // 480 KB spread per call, and the macro's own copy (varargs) in the arena.
    const std::string spread =
        "{% macro f(n) %}{{ varargs|length }}{% if n > 0 %}{{ f(n - 1, *x) }}{% endif %}"
        "{% endmacro %}{{ f(";
    EXPECT_EQ(render(spread + "50) }}", context, limits).text,
              "the chat template's output would exceed 4194304 bytes (*args)");
    const Rendered fits = render(spread + "2) }}", context, limits);
    EXPECT_TRUE(fits.ok) << fits.text;
    const std::string nested_maps = R"({"x": [[[)" + ones(20'000) + "]]]}";
    EXPECT_EQ(render("{{ x|map('map', 'map', 'string')|list|length }}", nested_maps, limits).text, "1");
    limits.arena_bytes = 512u << 10;
    EXPECT_EQ(render("{{ x|map('map', 'map', 'string')|list|length }}", nested_maps, limits).text,
              "the chat template's output would exceed 524288 bytes (map)");
}

TEST(RenderBudget, StackBackstopNamesItself) {
    RenderLimits limits;
    limits.stack_bytes = 16u << 10;
    const Rendered r =
        render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(99) }}", "{}", limits);
    EXPECT_EQ(r.text, "the chat template needs more than 16 KiB of stack to render this request");
}

TEST(RenderBudget, BudgetsGrowWithTheBody) {
    const RenderLimits small = RenderLimits::forRequest(0);
    const RenderLimits large = RenderLimits::forRequest(10u << 20);
    EXPECT_GT(large.arena_bytes, small.arena_bytes + (10u << 20));
    EXPECT_GT(large.output_bytes, small.output_bytes + (10u << 20));
    EXPECT_GT(large.steps, small.steps);
    EXPECT_EQ(RenderLimits::forRequest(std::size_t{1} << 62).arena_bytes,
              RenderLimits::forRequest(std::size_t{1} << 40).arena_bytes);
}

// Operations that could throw past render() (a C++ exception escaping as
// a server error) or loop without end: each fails or renders as Python does.
TEST(RenderBudget, EdgeArgumentsFailOrRenderAsPython) {
    const RenderLimits limits = RenderLimits::forRequest(1000);
    EXPECT_EQ(render("{{ [[1]]|map(attribute='99999999999999999999')|list }}", "{}", limits).text, "[Undefined]");
    EXPECT_EQ(render("{{ [[1]]|map(attribute='0')|list }}", "{}", limits).text, "[1]");
    const Rendered index = render("{{ '{99999999999999999999999}'.format(1) }}", "{}", limits);
    EXPECT_FALSE(index.ok);
    EXPECT_NE(index.text.find("out of range"), std::string::npos) << index.text;
    EXPECT_EQ(
        render("{{ (-1) ** 3 }}|{{ (-1) ** 1000000000000000000 }}|{{ 0 ** 0 }}|{{ 1 ** 99999999999 }}", "{}", limits)
            .text,
        "-1|1|1|1");
}

}  // namespace
}  // namespace dpgate::admission::jinja
