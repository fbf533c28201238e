// The Jinja engine: targeted behaviour (whitespace control, scoping,
// Undefined, errors, limits) and a differential run of every snippet in
// data/jinja_snippets.txt against Python's Jinja2 configured as transformers
// configures it (Debian's python3-jinja2; skipped when it is missing).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "admission/template/jinja/py_json.hpp"
#include "admission/template/jinja/render.hpp"
#include "admission/template/jinja/template.hpp"

namespace dpgate::admission::jinja {
namespace {

struct Rendered {
    bool ok = false;
    std::string text;  // output, or the error message
};

Rendered render(std::string_view source, std::string_view context_json = "{}", RenderLimits limits = {}) {
    std::string error;
    auto tpl = Template::parse(source, error);
    if (!tpl) return {false, "parse: " + error};
    Arena arena;
    Value context;
    if (auto e = pyJsonLoads(context_json, arena, context)) return {false, "context: " + e->message};
    Renderer renderer(*tpl, arena, limits);
    for (std::size_t i = 0; i < context.asDict().size; ++i) {
        renderer.setVariable(context.asDict().keys[i].text(), context.asDict().values[i]);
    }
    std::string out;
    if (auto e = renderer.render(out)) return {false, e->message};
    return {true, out};
}

std::string ok(std::string_view source, std::string_view context_json = "{}") {
    const Rendered r = render(source, context_json);
    EXPECT_TRUE(r.ok) << source << " -> " << r.text;
    return r.text;
}

std::string failure(std::string_view source, std::string_view context_json = "{}") {
    const Rendered r = render(source, context_json);
    EXPECT_FALSE(r.ok) << source << " rendered " << r.text;
    return r.text;
}

TEST(JinjaEngine, WhitespaceControlTrimAndLstripBlocks) {
    EXPECT_EQ(ok("  {% if true %}\n  x\n  {% endif %}\nend"), "  x\nend");
    EXPECT_EQ(ok("a {#- c -#}   b\n{# c #}\nc"), "ab\nc");
    EXPECT_EQ(ok("{%- if true -%}  x  {%- endif -%}"), "x");
    EXPECT_EQ(ok("  {%+ if true %}keep{% endif %}"), "  keep");
    EXPECT_EQ(ok("{% if true +%}\nx{% endif %}"), "\nx");
    EXPECT_EQ(ok("{{ 'a' }}\n{{ 'b' }}"), "a\nb");  // variables keep their newline
    EXPECT_EQ(ok("line\n"), "line");                // one trailing newline dropped
    EXPECT_EQ(ok("a\r\nb\rc"), "a\nb\nc");          // newlines normalised
    EXPECT_EQ(ok("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(JinjaEngine, LoopScopeAndNamespaces) {
    EXPECT_EQ(ok("{% set x = 'out' %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}"),
              "out1out2out");
    EXPECT_EQ(ok("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
              "3");
    EXPECT_EQ(ok("{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{% endfor %}"), "1/22/2");
    EXPECT_EQ(ok("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif "
                 "%}{{ i }}{% endfor %}"),
              "02");
    EXPECT_EQ(ok("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "a1b2");
}

TEST(JinjaEngine, MacrosCallerAndDefaults) {
    EXPECT_EQ(ok("{% macro m(a, b=2) %}[{{ a }}{{ b }}{{ caller() if caller is defined }}]{% endmacro %}"
                 "{{ m(1) }}{% call m(5) %}C{% endcall %}"),
              "[12][52C]");
    EXPECT_EQ(ok("{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, x=3) }}"), "(1, 2){'x': 3}");
    EXPECT_EQ(failure("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "macro 'm' takes not more than 1 argument(s)");
}

TEST(JinjaEngine, UndefinedRendersEmptyButFailsWhenUsed) {
    EXPECT_EQ(ok("[{{ nothing }}][{{ nothing|length }}][{{ nothing is defined }}][{{ nothing|default('d') }}]"),
              "[][0][False][d]");
    EXPECT_EQ(failure("{{ nothing.attr }}"), "'nothing' is undefined");
    EXPECT_EQ(failure("{{ d.missing.attr }}", R"({"d": {}})"), "'dict object' has no attribute 'missing'");
    EXPECT_EQ(ok("{{ (1 if false) is defined }}"), "False");
}

TEST(JinjaEngine, PythonTypesAndErrors) {
    EXPECT_EQ(
        ok("{{ none }}|{{ true }}|{{ [1, 'a', none, 1.0] }}|{{ {'a': (1,)} }}|{{ 1/2 }}|{{ -7//2 }}|{{ -7 % 3 }}"),
        "None|True|[1, 'a', None, 1.0]|{'a': (1,)}|0.5|-4|2");
    EXPECT_EQ(failure("{{ 'a' + none }}"), "can only concatenate str (not \"NoneType\") to str");
    EXPECT_EQ(failure("{{ 1 < 'a' }}"), "'<' not supported between instances of 'int' and 'str'");
    EXPECT_EQ(failure("{{ raise_exception('Conversation roles must alternate') }}"),
              "Conversation roles must alternate");
    EXPECT_EQ(failure("{{ range(100001) }}"),
              "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    EXPECT_EQ(failure("{{ [].append(1) }}"), "access to attribute 'append' of 'list' object is unsafe.");
}

TEST(JinjaEngine, TojsonIsPythonsJsonDumps) {
    EXPECT_EQ(ok("{{ x|tojson }}", R"({"x": {"a": [1, 2.0, "é<>&"], "b": null}})"),
              "{\"a\": [1, 2.0, \"é<>&\"], \"b\": null}");
    EXPECT_EQ(ok("{{ x|tojson(indent=2) }}", R"({"x": {"a": [1]}})"), "{\n  \"a\": [\n    1\n  ]\n}");
    EXPECT_EQ(failure("{{ nothing|tojson }}"), "Object of type Undefined is not JSON serializable");
}

TEST(JinjaEngine, ParseErrorsNameTheLine) {
    std::string error;
    EXPECT_EQ(Template::parse("ok\n{% if %}", error), nullptr);
    EXPECT_EQ(error.rfind("line 2: ", 0), 0u) << error;
    EXPECT_EQ(Template::parse("{{ x|nosuchfilter }}", error), nullptr);
    EXPECT_EQ(error, "line 1: No filter named 'nosuchfilter'.");
    EXPECT_EQ(Template::parse("{% for x in y %}", error), nullptr);
    EXPECT_NE(error.find("endfor"), std::string::npos) << error;
    EXPECT_EQ(Template::parse("{% include 'x' %}", error), nullptr);
    EXPECT_NE(error.find("not supported"), std::string::npos) << error;
}

TEST(JinjaEngine, WorkIsBounded) {
    RenderLimits tight;
    tight.steps = 10'000;
    const Rendered loop = render("{% for i in range(100000) %}{{ i }}{% endfor %}", "{}", tight);
    EXPECT_FALSE(loop.ok);
    EXPECT_NE(loop.text.find("steps"), std::string::npos) << loop.text;
    // Quadratic concatenation driven by input stops at the arena bound.
    RenderLimits small;
    small.arena_bytes = 1 << 20;
    const Rendered grow =
        render("{% set ns = namespace(s='') %}{% for i in range(5000) %}{% set ns.s = ns.s + x %}{% endfor %}",
               R"({"x": ")" + std::string(1000, 'a') + R"("})", small);
    EXPECT_FALSE(grow.ok);
    EXPECT_NE(grow.text.find("needed more than 1048576 bytes"), std::string::npos) << grow.text;
    RenderLimits shallow;
    shallow.max_call_depth = 50;
    const Rendered deep = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", shallow);
    EXPECT_FALSE(deep.ok);
    EXPECT_NE(deep.text.find("recursion"), std::string::npos) << deep.text;
}

// Text built outside the arena before it lands there (a join, a repr, a
// tojson, padding, a replace) stops at the arena's bound too, before it is
// built: a few bytes of template can ask for exponential or huge text.
TEST(JinjaEngine, TextBuiltOutsideTheArenaIsBounded) {
    RenderLimits small;
    small.arena_bytes = 1 << 20;
    auto stopsAtTheBound = [&](std::string_view source) {
        const Rendered r = render(source, "{}", small);
        EXPECT_FALSE(r.ok) << source;
        EXPECT_NE(r.text.find(" 1048576 bytes"), std::string::npos) << source << " -> " << r.text;
    };
    // A list holding the same list twice: 40 levels are 2^40 items of text.
    const std::string doubling =
        "{% set ns = namespace(a=['xy']) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}";
    stopsAtTheBound(doubling + "{{ ns.a }}");
    stopsAtTheBound(doubling + "{{ ns.a | tojson }}");
    stopsAtTheBound(doubling + "{{ ns.a | string | length }}");
    // Joins of joins multiply lengths.
    stopsAtTheBound(
        "{% set ns = namespace(s='abcdefgh') %}{% for i in range(12) %}{% set ns.s = ns.s | join(ns.s) %}{% endfor %}");
    stopsAtTheBound(
        "{% set ns = namespace(s='abcdefgh') %}{% for i in range(12) %}{% set ns.s = ns.s.replace('', ns.s) %}{% "
        "endfor %}");
    stopsAtTheBound("{{ 'x'.center(1000000000000) }}");
    stopsAtTheBound("{{ 'x'.zfill(1000000000000) }}");
    stopsAtTheBound("{{ 'x' | center(1000000000000) }}");
    stopsAtTheBound("{{ '{:>1000000000000}'.format('x') }}");
    stopsAtTheBound("{{ ([1, 2] * 40000000) | length }}");
    EXPECT_NE(failure("{{ ([1, 2] * 4611686018427387903) | length }}").find("too long"), std::string::npos);
    // A width past sys.maxsize is Python's own error, not an overflow.
    EXPECT_NE(failure("{{ '{:99999999999999999999}'.format('x') }}").find("Too many decimal digits"),
              std::string::npos);
    // Under the bound, the same operations render as before.
    EXPECT_EQ(
        ok("{{ 'ab' | join('-') }}|{{ 'ab'.replace('', '.') }}|{{ 'x'.center(5, '*') }}|{{ [[1], [1]] | tojson }}"),
        "a-b|.a.b.|**x**|[[1], [1]]");
}

// Every snippet renders as Python's Jinja2 renders it (or both fail).
TEST(JinjaEngine, SnippetsMatchPythonJinja2) {
    const std::filesystem::path data = std::filesystem::path(DPGATE_SOURCE_DIR) / "tests/unit/admission/template/data";
    if (std::system("/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1") != 0) {
        GTEST_SKIP() << "/usr/bin/python3 with jinja2 (Debian python3-jinja2) is not installed";
    }
    std::ifstream snippets_in(data / "jinja_snippets.txt");
    std::stringstream snippets_text;
    snippets_text << snippets_in.rdbuf();
    std::ifstream context_in(data / "jinja_context.json");
    std::stringstream context;
    context << context_in.rdbuf();
    std::vector<std::string> snippets;
    std::string all = snippets_text.str();
    for (std::size_t at = 0;;) {
        const std::size_t sep = all.find("\n===\n", at);
        const std::string one = all.substr(at, sep == std::string::npos ? std::string::npos : sep - at);
        if (one.find_first_not_of(" \n") != std::string::npos) snippets.push_back(one);
        if (sep == std::string::npos) break;
        at = sep + 5;
    }
    ASSERT_GE(snippets.size(), 90u);

    // Python renders each snippet; answers come back as JSON lines.
    const std::filesystem::path input = std::filesystem::temp_directory_path() / "dpgate_jinja_snippets.json";
    {
        std::ofstream out(input);
        // The context as written (key order and big integers kept).
        out << "{\"snippets\": " << nlohmann::json(snippets).dump() << ", \"context\": " << context.str() << "}";
    }
    const std::string command = "/usr/bin/python3 " + (data / "render_with_jinja2.py").string() + " " + input.string();
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string output;
    char buffer[65536];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
    ASSERT_EQ(::pclose(pipe), 0) << output;
    std::filesystem::remove(input);
    std::istringstream lines(output);
    std::size_t index = 0;
    for (std::string line; std::getline(lines, line); ++index) {
        ASSERT_LT(index, snippets.size());
        const auto python = nlohmann::json::parse(line);
        const Rendered ours = render(snippets[index], context.str());
        if (!python.at("ok").get<bool>()) {
            EXPECT_FALSE(ours.ok) << "Python failed (" << python.at("text") << ") but dpgate rendered: " << ours.text
                                  << "\n"
                                  << snippets[index];
            continue;
        }
        EXPECT_TRUE(ours.ok) << ours.text << "\n" << snippets[index];
        EXPECT_EQ(ours.text, python.at("text").get<std::string>()) << snippets[index];
    }
    EXPECT_EQ(index, snippets.size());
}

}  // namespace
}  // namespace dpgate::admission::jinja
