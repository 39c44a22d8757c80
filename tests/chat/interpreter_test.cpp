// The evaluator: loops, scoping, macros, undefined values, errors with locations, and limits.
#include "chat/interpreter.h"

#include <gtest/gtest.h>

#include "chat_testing.h"

namespace {

using chat_testing::is_error;
using chat_testing::render;
using nlohmann::ordered_json;

TEST(ChatInterpreter, LoopVariablesMatchJinja) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};"
                   "{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|"
                   "{% endfor %}"),
            "<1>2|1<2>3|2<3>|");
  EXPECT_EQ(render("{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "abab");
  EXPECT_EQ(render("{% for x in [1, 1, 2] %}{{ loop.changed(x) }}{% endfor %}"), "TrueFalseTrue");
  EXPECT_EQ(render("{% for x in range(9) if x is odd %}{{ loop.index }}/{{ loop.length }} "
                   "{% endfor %}"),
            "1/4 2/4 3/4 4/4 ");
  EXPECT_EQ(render("{% for a in [[1], [2]] %}{% for b in a %}{{ loop.depth }}{% endfor %}"
                   "{% endfor %}"),
            "11");
}

TEST(ChatInterpreter, BreakContinueAndElse) {
  EXPECT_EQ(render("{% for x in range(9) %}{% if x > 3 %}{% break %}{% endif %}"
                   "{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(render("{% for x in [] %}never{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in undefined_list %}never{% else %}empty{% endfor %}"), "empty");
  EXPECT_TRUE(is_error(render("{% break %}")));
}

TEST(ChatInterpreter, RecursiveLoopsPassDepth) {
  ordered_json tree = ordered_json::parse(R"([{"n": "a", "c": [{"n": "b", "c": []}]}])");
  EXPECT_EQ(render("{% for t in tree recursive %}{{ t.n }}{{ loop.depth }}{{ loop(t.c) }}"
                   "{% endfor %}",
                   {{"tree", tree}}),
            "a1b2");
}

TEST(ChatInterpreter, ScopesFollowJinjaFrames) {
  // A set inside a loop body is local to that iteration; the outer value shows through.
  EXPECT_EQ(render("{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }}"
                   "{% endfor %}{{ x }}"),
            "0101010");
  // `if` is not a frame; namespaces carry state out of loops.
  EXPECT_EQ(render("{% if true %}{% set y = 1 %}{% endif %}{{ y }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
                   "{% endfor %}{{ ns.n }}"),
            "3");
  // Macros see the template's top-level variables as they are when called.
  EXPECT_EQ(render("{% macro m() %}{{ z }}{% endmacro %}{{ m() }}{% set z = 5 %}{{ m() }}"), "5");
  EXPECT_EQ(render("{% macro m() %}{% set hidden = 1 %}{% endmacro %}{{ m() }}"
                   "{{ hidden is defined }}"),
            "False");
  EXPECT_EQ(render("{% set a, b = 'xy' %}{{ b }}{{ a }}"), "yx");
  EXPECT_TRUE(is_error(render("{% set s = 'str' %}{% set s.attr = 1 %}")));
}

TEST(ChatInterpreter, MacrosTakeDefaultsVarargsKwargsAndCaller) {
  EXPECT_EQ(render("{% macro m(a, b=2, c=a) %}{{ a }}{{ b }}{{ c }}{% endmacro %}"
                   "{{ m(1) }}|{{ m(1, 3) }}|{{ m(1, c=9) }}|{{ m() }}"),
            "121|131|129|2");
  EXPECT_EQ(
      render("{% macro v(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}"),
      "1(2,){'k': 3}");
  EXPECT_EQ(render("{% macro wrap() %}[{{ caller() }}]{% endmacro %}"
                   "{% call wrap() %}inside{% endcall %}"),
            "[inside]");
  EXPECT_EQ(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}"),
            "<1><2>");
  EXPECT_EQ(render("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "ERROR: chat template: line 1, column 34: macro 'm' takes not more than 1 argument(s)");
}

TEST(ChatInterpreter, BlocksCaptureFilterAndScope) {
  EXPECT_EQ(
      render("{% set t %}a{{ 1 + 1 }}{% endset %}{{ t }}|{% set u | upper %}b{% endset %}{{ u }}"),
      "a2|B");
  EXPECT_EQ(render("{% filter trim|upper %}  text  {% endfilter %}"), "TEXT");
  EXPECT_EQ(render("{% with a = 1 %}{{ a }}{% endwith %}{{ a is defined }}"), "1False");
  EXPECT_EQ(render("{% generation %}{% set g = 1 %}gen{% endgeneration %}{{ g is defined }}"),
            "genFalse");
}

TEST(ChatInterpreter, UndefinedBehavesLikeJinjaDefaultUndefined) {
  EXPECT_EQ(render("[{{ missing }}]{{ missing is defined }}{{ missing|default('d') }}"
                   "{{ missing|length }}{{ not missing }}"),
            "[]Falsed0True");
  EXPECT_EQ(render("{{ none.attr is defined }}|{{ 'str'.nope is defined }}|{{ [][3] is defined }}"),
            "False|False|False");
  EXPECT_EQ(render("{{ missing.attr }}"),
            "ERROR: chat template: line 1, column 4: 'missing' is undefined");
  EXPECT_EQ(render("\n  {{ x.items() }}", {{"x", "text"}}),
            "ERROR: chat template: line 2, column 6: 'str object' has no attribute 'items'");
  EXPECT_EQ(
      render(R"({{ 'x'['line\nbreak']() }})"),  // errors stay on one line
      R"(ERROR: chat template: line 1, column 4: 'str object' has no attribute 'line\nbreak')");
  EXPECT_EQ(render("{{ missing + 1 }}"),
            "ERROR: chat template: line 1, column 4: 'missing' is undefined");
}

TEST(ChatInterpreter, ImmutableSandboxBlocksMutationUnlessAllowed) {
  const char* src = "{% set l = [1] %}{{ l.append(2) }}{{ l }}";
  EXPECT_EQ(render(src),
            "ERROR: chat template: line 1, column 21: access to attribute 'append' "
            "of 'list' object is unsafe.");
  chat::EngineOptions mutable_options;
  mutable_options.mutable_sandbox = true;
  EXPECT_EQ(render(src, ordered_json::object(), mutable_options), "None[1, 2]");
  EXPECT_EQ(render("{% set l = [1, 2] %}{{ l.pop() }}{{ l }}"), "2[1]");  // pop is not blocked
  EXPECT_EQ(render("{{ [].append is defined }}"), "False");
}

TEST(ChatInterpreter, RaiseExceptionReportsTheTemplatesMessageExactly) {
  EXPECT_EQ(render("{{ raise_exception('Roles must alternate user/assistant') }}"),
            "ERROR: chat template: Roles must alternate user/assistant");
  EXPECT_EQ(render("{% macro m() %}{{ raise_exception('from macro') }}{% endmacro %}{{ m() }}"),
            "ERROR: chat template: from macro");
}

TEST(ChatInterpreter, UnsupportedConstructsNameTheirLineAndColumn) {
  EXPECT_EQ(render("hello\n{{ 'text'|wordwrap(3) }}"),
            "ERROR: chat template: line 2, column 11: unsupported filter 'wordwrap' — pass "
            "--chat-template FILE or a built-in name (gemma4, chatml, llama3)");
  EXPECT_EQ(render("a\n  {% include 'other.jinja' %}"),
            "ERROR: chat template: line 2, column 6: unsupported tag 'include' — pass "
            "--chat-template FILE or a built-in name (gemma4, chatml, llama3)");
  EXPECT_EQ(render("{% do x %}"),
            "ERROR: chat template: line 1, column 4: unknown tag 'do' — pass "
            "--chat-template FILE or a built-in name (gemma4, chatml, "
            "llama3)");
  EXPECT_EQ(render("{{ x|from_json }}"),
            "ERROR: chat template: line 1, column 6: no filter named 'from_json' — pass "
            "--chat-template FILE or a built-in name (gemma4, chatml, llama3)");
  // A filter that is never reached does not fail the template (as in Jinja's if branches).
  EXPECT_EQ(render("{% if false %}{{ x|from_json }}{% endif %}ok"), "ok");
  EXPECT_EQ(render("{% for x in [1] %}\n{% endif %}"),
            "ERROR: chat template: line 2, column 4: unexpected 'endif': no open block expects "
            "it here");
  EXPECT_EQ(render("{% if true %}\nnever closed"),
            "ERROR: chat template: line 1, column 4: 'if' is never closed (expected 'elif' or "
            "'else' or 'endif' before the end of the template)");
}

TEST(ChatInterpreter, RecursionAndNestingAreBoundedNotFatal) {
  std::string out = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_TRUE(out.find("deeper than 256 levels") != std::string::npos) << out;
  std::string deep_expr = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_TRUE(render(deep_expr).find("nested deeper than") != std::string::npos);
  std::string deep_blocks;
  for (int i = 0; i < 2000; ++i) deep_blocks += "{% if true %}";
  EXPECT_TRUE(render(deep_blocks).find("nested deeper than") != std::string::npos);
}

TEST(ChatInterpreter, IterationOutputAndTimeLimitsStopRunawayTemplates) {
  chat::EngineOptions small;
  small.limits.max_iterations = 1000;
  EXPECT_EQ(render("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                   ordered_json::object(), small),
            "ERROR: chat template: line 1, column 29: more than 1000 loop iterations");
  EXPECT_EQ(render("{{ 'x' * 1000000000 }}"),
            "ERROR: chat template: line 1, column 4: string repetition larger than the 64 MiB "
            "limit");
  EXPECT_TRUE(
      is_error(render("{% set ns = namespace(s='xx') %}{% for i in range(64) %}"
                      "{% set ns.s = ns.s + ns.s %}{% endfor %}")));
  chat::EngineOptions quick;
  quick.limits.max_milliseconds = 20;
  std::string slow = render(
      "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}"
      "{% endfor %}{% endfor %}",
      ordered_json::object(), quick);
  EXPECT_TRUE(slow.find("rendering took longer than 20 ms") != std::string::npos ||
              slow.find("larger than") != std::string::npos)
      << slow.substr(0, 200);
  EXPECT_EQ(render("{{ range(100001)|length }}"),
            "ERROR: chat template: line 1, column 4: Range too big. The sandbox blocks ranges "
            "larger than MAX_RANGE (100000).");
}

TEST(ChatInterpreter, SelfReferencesPrintLikePythonAndDoNotLeak) {
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}"),
            "<Namespace {'self': <Namespace {...}>}>");
  chat::EngineOptions mutable_options;
  mutable_options.mutable_sandbox = true;
  EXPECT_EQ(render("{% set l = [1] %}{{ l.append(l) }}{{ l }}|{{ {'a': l} }}",
                   ordered_json::object(), mutable_options),
            "None[1, [...]]|{'a': [1, [...]]}");
  EXPECT_TRUE(is_error(render("{% set l = [1] %}{{ l.append(l) }}{{ l|tojson }}",
                              ordered_json::object(), mutable_options)));
}

TEST(ChatInterpreter, DeeplyNestedDataIsBoundedNotFatal) {
  // Built by the template: freeing and printing a 100000-deep list must not overflow the stack.
  std::string out = render(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
      "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}"
      "{{ (ns.x|string)[:6] }}");
  EXPECT_EQ(out, "1[[[[[[");
  // Passed in: refused with a one-line error.
  // Built by moving, not copying: nlohmann's copy recurses, and under ASan a few thousand levels
  // overflow the test's own stack before headroom sees the value.
  ordered_json deep = ordered_json::array();
  for (int i = 0; i < 600; ++i) {  // past the 500 limit
    ordered_json outer = ordered_json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  EXPECT_EQ(render("{{ x }}", {{"x", deep}}),
            "ERROR: chat template: variable 'x': data nested deeper than 500 levels");
}

TEST(ChatInterpreter, StrftimeNowUsesTheConfiguredClock) {
  chat::EngineOptions options;
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mday = 15;
  t.tm_hour = 10;
  t.tm_min = 30;
  t.tm_wday = 3;
  options.now = t;
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y, %A %H:%M') }}", ordered_json::object(), options),
            "15 Jan 2025, Wednesday 10:30");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");  // real clock
}

}  // namespace
