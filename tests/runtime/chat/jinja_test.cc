// Unit tests of the Jinja-subset interpreter (runtime/chat/jinja.h): each
// construct, whitespace control as transformers configures it, Python-style
// value formatting, and errors (positions, messages, limits).
#include "runtime/chat/jinja.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace inferd::jinja {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::string> Render(const std::string& src,
                                   const std::string& ctx = "{}",
                                   RenderOptions options = RenderOptions()) {
  auto t = Template::Parse(src);
  if (!t.ok()) return t.status();
  auto v = Value::FromJson(nlohmann::ordered_json::parse(ctx));
  if (!v.ok()) return v.status();
  return (*t)->Render(*v, options);
}

std::string R(const std::string& src, const std::string& ctx = "{}") {
  auto r = Render(src, ctx);
  EXPECT_TRUE(r.ok()) << src << ": " << r.status();
  return r.ok() ? *r : "<error>";
}

TEST(JinjaTest, PrintsTextAndExpressions) {
  EXPECT_EQ(R("a {{ x }} b", R"({"x": "X"})"), "a X b");
  EXPECT_EQ(R("{{ 'it\\'s' ~ \"\\n\" }}"), "it's\n");
  EXPECT_EQ(R("{{ 'a' 'b' }}"), "ab");
  EXPECT_EQ(R("{# comment #}x"), "x");
}

TEST(JinjaTest, FormatsValuesLikePythonStr) {
  EXPECT_EQ(R("{{ 1.0 }} {{ true }} {{ none }} {{ 3 }} {{ 0.1 + 0.2 }}"),
            "1.0 True None 3 0.30000000000000004");
  EXPECT_EQ(R("{{ 1e16 }} {{ 1e-5 }} {{ 1e15 }} {{ 1.5e300 * 1e300 }}"),
            "1e+16 1e-05 1000000000000000.0 inf");
  EXPECT_EQ(R("{{ [1, 'a', None, True, 1.5, {'k': (1, 2)}] }}"),
            "[1, 'a', None, True, 1.5, {'k': (1, 2)}]");
  EXPECT_EQ(R("{{ ['\\n', \"it's\", 'a\"b'] }}"), R"(['\n', "it's", 'a"b'])");
  EXPECT_EQ(R("{{ undefined_name }}|{{ d.missing }}", R"({"d": {}})"), "|");
}

TEST(JinjaTest, Truthiness) {
  EXPECT_EQ(R("{% if '' or 0 or 0.0 or [] or {} or none or u %}T{% else %}F{% endif %}"), "F");
  EXPECT_EQ(R("{% if 'x' and 1 and [0] and {'a': 1} %}T{% endif %}"), "T");
  EXPECT_EQ(R("{{ 0 or 'b' }} {{ 'a' and 'b' }} {{ not u }}"), "b b True");
}

TEST(JinjaTest, ArithmeticAndComparison) {
  EXPECT_EQ(R("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 'ab' * 3 }}"),
            "3 -4 2 3.5 1024 ababab");
  EXPECT_EQ(R("{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }}"),
            "True True True True True");
  EXPECT_EQ(R("{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }}"), "True False True");
  EXPECT_EQ(R("{{ [1] + [2] }} {{ 'a' + 'b' }} {{ 1 ~ 2 }}"), "[1, 2] ab 12");
  EXPECT_EQ(R("{{ 'y' if 0 else 'n' }}|{{ 'y' if 0 }}|{{ -3 | abs }}"), "n||3");
}

TEST(JinjaTest, SubscriptsAndSlices) {
  const char* ctx = R"({"xs": [1, 2, 3], "s": "héllo", "d": {"a": {"b": 5}}})";
  EXPECT_EQ(R("{{ xs[0] }} {{ xs[-1] }} {{ xs[5] }} {{ xs[1:] }} {{ xs[::-1] }} {{ xs[:-1] }}", ctx),
            "1 3  [2, 3] [3, 2, 1] [1, 2]");
  EXPECT_EQ(R("{{ s[1] }} {{ s[::-1] }} {{ s|length }} {{ d.a.b }} {{ d['a']['b'] }}", ctx),
            "é olléh 5 5 5");
}

TEST(JinjaTest, ForLoops) {
  EXPECT_EQ(R("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
              "{{ loop.length }}{{ loop.revindex }};{% endfor %}",
              R"({"xs": ["a", "b"]})"),
            "10TrueFalse22;21FalseTrue21;");
  EXPECT_EQ(R("{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}", R"({"xs": [1, 2, 3]})"),
            "2232");
  EXPECT_EQ(R("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", R"({"d": {"z": 1, "a": 2}})"),
            "z=1,a=2,");
  EXPECT_EQ(R("{% for k, v in d|items %}{{ k }}{% endfor %}", R"({"d": {"z": 1, "a": 2}})"), "za");
  EXPECT_EQ(R("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
              "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(R("{% for x in [1, 2] %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}"), "-2;1-;");
}

TEST(JinjaTest, SetScopesAndNamespaces) {
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(R("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}"
              "{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(R("{% set block %}in {{ 1 }}{% endset %}[{{ block }}]"), "[in 1]");
  EXPECT_EQ(R("{% with y = 3 %}{{ y }}{% endwith %}{{ y }}"), "3");
}

TEST(JinjaTest, Macros) {
  EXPECT_EQ(R("{% macro f(a, b='z') %}[{{ a }}{{ b }}]{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}"),
            "[1z][23]");
  auto r = Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("recursion depth"));
}

TEST(JinjaTest, WhitespaceControlWithTrimAndLstripBlocks) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks drops the
  // indentation before one; {%- / -%} strip all whitespace.
  EXPECT_EQ(R("{% if true %}\n  x\n  {% endif %}\n  {%- if true %}y{% endif %}  \n{# c #}\nz {{ 'v' }}\n"),
            "  x\ny  \nz v");
  EXPECT_EQ(R("a  {% if true -%}  \n b {%+ if true %} c{% endif %}{% endif %}"), "a  b  c");
  EXPECT_EQ(R("a\n{{- 'b' -}}\n c"), "abc");
  EXPECT_EQ(R("x\n"), "x");  // keep_trailing_newline=False
  EXPECT_EQ(R("a\r\nb"), "a\nb");
}

TEST(JinjaTest, Tests) {
  EXPECT_EQ(R("{{ x is defined }} {{ u is undefined }} {{ none is none }} {{ 'a' is string }}"
              " {{ {} is mapping }} {{ 3 is integer }} {{ true is integer }} {{ 1.5 is number }}"
              " {{ true is boolean }} {{ [] is iterable }} {{ 'a' is sequence }} {{ 2 is even }}"
              " {{ 'a' is equalto 'a' }} {{ x is not none }}",
              R"({"x": 1})"),
            "True True True True True True False True True True True True True True");
}

TEST(JinjaTest, Filters) {
  EXPECT_EQ(R("{{ '  a b \n'|trim }}|{{ 'aB'|upper }}|{{ 'aB'|lower }}|{{ [1, 2]|length }}"
              "|{{ [1, 2]|join(', ') }}|{{ [3, 4]|first }}|{{ [3, 4]|last }}|{{ u|default('d') }}"
              "|{{ 'abc'|list }}|{{ 5|string }}|{{ '3.7'|int }}|{{ '2'|float }}"
              "|{{ 'aXa'|replace('a', 'b') }}|{{ 'hello world'|capitalize }}|{{ 'hello world'|title }}"),
            "a b|AB|ab|2|1, 2|3|4|d|['a', 'b', 'c']|5|3|2.0|bXb|Hello world|Hello World");
  EXPECT_EQ(R("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|list }}"
              "{{ ms|rejectattr('role', 'equalto', 'user')|list|length }}",
              R"({"ms": [{"role": "user", "c": 1}, {"role": "bot", "c": 2}, {"role": "user", "c": 3}]})"),
            "[1, 3]1");
  EXPECT_EQ(R("{{ [1, 2, 1]|unique|list }} {{ 2.5|round }} {{ 3|round }} {{ 'a\nb'|indent(2) }}"),
            "[1, 2] 2.0 3 a\n  b");
}

TEST(JinjaTest, ToJsonMatchesPythonJsonDumps) {
  const char* ctx = R"({"d": {"b": 1, "a": [1, {"c": null}], "s": "é\"\n\u0001", "f": 1.0}})";
  EXPECT_EQ(R("{{ d|tojson }}", ctx),
            "{\"b\": 1, \"a\": [1, {\"c\": null}], \"s\": \"é\\\"\\n\\u0001\", \"f\": 1.0}");
  EXPECT_EQ(R("{{ d.a|tojson(indent=2) }}", ctx), "[\n  1,\n  {\n    \"c\": null\n  }\n]");
  EXPECT_EQ(R("{{ [] |tojson(indent=2) }}{{ {} | tojson }}"), "[]{}");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}"), "{\"a\": 2, \"b\": 1}");
}

TEST(JinjaTest, StringAndDictMethods) {
  EXPECT_EQ(R("{{ ' a '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a,b'.split(',') }}|{{ 'a  b'.split() }}"
              "|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'abc'.find('c') }}"
              "|{{ 'a-b'.replace('-', '+') }}|{{ 'hi {}'.format('x') }}|{{ 'aB'.upper() }}"),
            "a|axx|['a', 'b']|['a', 'b']|True|True|2|a+b|hi x|AB");
  EXPECT_EQ(R("{{ d.get('a') }} {{ d.get('z', 5) }} {{ d.keys()|list }} {{ d.values()|list }}",
              R"({"d": {"a": 1}})"),
            "1 5 ['a'] [1]");
}

TEST(JinjaTest, StrftimeNowUsesTheInjectedClock) {
  RenderOptions options;
  options.time_zone = absl::UTCTimeZone();
  options.now = absl::FromCivil(absl::CivilSecond(2024, 7, 26, 10, 0, 0), absl::UTCTimeZone());
  auto r = Render("{{ strftime_now('%d %b %Y') }}", "{}", options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "26 Jul 2024");
}

TEST(JinjaErrorTest, SyntaxErrorHasLineAndColumn) {
  auto r = Render("line one\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("line 3:8"));
}

TEST(JinjaErrorTest, UnclosedBlockIsAnError) {
  auto r = Render("{% for x in xs %}a");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("endfor"));
}

TEST(JinjaErrorTest, UnknownFilterIsNamed) {
  auto r = Render("x\n  {{ a|frobnicate }}");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("No filter named 'frobnicate'"));
  EXPECT_THAT(r.status().message(), HasSubstr("line 2:"));
}

TEST(JinjaErrorTest, UnsupportedTagIsNamed) {
  auto r = Render("{% include 'x.html' %}");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'include'"));
}

TEST(JinjaErrorTest, RaiseExceptionCarriesTheMessage) {
  auto r = Render("ok\n{{ raise_exception('Roles must alternate!') }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("Roles must alternate!"));
  EXPECT_THAT(r.status().message(), HasSubstr("line 2"));
}

TEST(JinjaErrorTest, UndefinedMisuseIsAnError) {
  EXPECT_FALSE(Render("{{ u.x }}").ok());
  EXPECT_FALSE(Render("{{ u['x'] }}").ok());
  EXPECT_FALSE(Render("{{ u + 1 }}").ok());
  EXPECT_FALSE(Render("{{ u|tojson }}").ok());
  EXPECT_FALSE(Render("{{ 1 / 0 }}").ok());
  EXPECT_FALSE(Render("{{ [1].append(2) }}").ok());  // sandboxed
}

TEST(JinjaLimitsTest, HostileTemplatesFailInsteadOfHanging) {
  // Too many steps.
  auto r = Render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("step limit"));
  // Output too large.
  RenderOptions small;
  small.max_output_bytes = 1000;
  r = Render("{% for i in range(2000) %}x{% endfor %}", "{}", small);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("longer than 1000"));
  // String doubling.
  r = Render("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}"
             "{% endfor %}");
  EXPECT_FALSE(r.ok());
  // Deeply nested expressions at parse time.
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  r = Render(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("nested too deeply"));
  // Deeply nested values.
  r = Render("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}"
             "{% endfor %}{{ ns.x }}");
  EXPECT_FALSE(r.ok());
  // range() bound (the sandbox's MAX_RANGE).
  EXPECT_FALSE(Render("{{ range(10000000)|length }}").ok());
}

}  // namespace
}  // namespace inferd::jinja
