// Filters and tests: the ones chat templates lean on, checked against Jinja's documented results.
#include <gtest/gtest.h>

#include "chat_testing.h"

namespace {

using chat_testing::is_error;
using chat_testing::render;
using nlohmann::ordered_json;

const ordered_json kPeople = ordered_json::parse(
    R"([{"name": "Ann", "age": 31}, {"name": "bob", "age": 25}, {"name": "Cid", "age": 31}])");

TEST(ChatFilters, TojsonIsHuggingFacesJsonDumps) {
  ordered_json d = ordered_json::parse(R"({"b": 1, "a": [1.0, null, true, "é<&>'"]})");
  EXPECT_EQ(render("{{ d|tojson }}", {{"d", d}}), R"({"b": 1, "a": [1.0, null, true, "é<&>'"]})");
  EXPECT_EQ(render("{{ d|tojson(indent=2) }}", {{"d", d}}),
            "{\n  \"b\": 1,\n  \"a\": [\n    1.0,\n    null,\n    true,\n    \"é<&>'\"\n  ]\n}");
  EXPECT_EQ(render("{{ d|tojson(sort_keys=true, separators=(',', ':')) }}", {{"d", d}}),
            R"({"a":[1.0,null,true,"é<&>'"],"b":1})");
  EXPECT_EQ(render("{{ 'é😀'|tojson(ensure_ascii=true) }}"), R"("\u00e9\ud83d\ude00")");
  EXPECT_EQ(render(R"({{ 'q"\\\n\x01'|tojson }})"), R"("q\"\\\n\u0001")");
  EXPECT_TRUE(is_error(render("{{ [1]|map('string')|tojson }}")));  // a generator, as in Python
  EXPECT_TRUE(is_error(render("{{ missing|tojson }}")));
}

TEST(ChatFilters, SortingIsStableAndCaseInsensitiveByDefault) {
  ordered_json words = {"banana", "Apple", "cherry", "apple"};
  EXPECT_EQ(render("{{ w|sort }}", {{"w", words}}), "['Apple', 'apple', 'banana', 'cherry']");
  EXPECT_EQ(render("{{ w|sort(case_sensitive=true) }}", {{"w", words}}),
            "['Apple', 'apple', 'banana', 'cherry']");
  EXPECT_EQ(render("{{ w|sort(reverse=true)|join(',') }}", {{"w", words}}),
            "cherry,banana,Apple,apple");
  EXPECT_EQ(
      render("{{ p|sort(attribute='age')|map(attribute='name')|join(',') }}", {{"p", kPeople}}),
      "bob,Ann,Cid");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'A': 2, 'a': 3}|dictsort %}{{ k }}{% endfor %}"),
            "Aab");
  EXPECT_EQ(render("{{ w|unique|list }}", {{"w", words}}), "['banana', 'Apple', 'cherry']");
  EXPECT_TRUE(is_error(render("{{ [1, 'a']|sort }}")));
}

TEST(ChatFilters, MapSelectRejectAndAttributePaths) {
  ordered_json vars = {{"p", kPeople}};
  EXPECT_EQ(render("{{ p|map(attribute='name')|list }}", vars), "['Ann', 'bob', 'Cid']");
  EXPECT_EQ(render("{{ p|selectattr('age', 'gt', 30)|map(attribute='name')|join }}", vars),
            "AnnCid");
  EXPECT_EQ(render("{{ p|rejectattr('age', 'equalto', 31)|first }}", vars),
            "{'name': 'bob', 'age': 25}");
  EXPECT_EQ(render("{{ [1, 2, 3, 4]|select('even')|list }}{{ [0, '', 'x']|select|list }}"),
            "[2, 4]['x']");
  EXPECT_EQ(render("{{ p|map(attribute='missing', default='?')|join }}", vars), "???");
  EXPECT_EQ(render("{{ ['a', 'b']|map('upper')|join('-') }}"), "A-B");
  EXPECT_EQ(render("{{ none|map('upper')|list }}"), "[]");  // falsy input: nothing to map
}

TEST(ChatFilters, StringFilters) {
  EXPECT_EQ(render("{{ '  a  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'hello wORLD-x'|title }}|"
                   "{{ 'hELLO'|capitalize }}|{{ 'ab'|center(6) }}|{{ 'a b'|wordcount }}"),
            "a|a|Hello World-X|Hello|  ab  |2");
  EXPECT_EQ(render("{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, first=true) }}"),
            "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(render("{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'Hello World more'|truncate(9) }}"),
            "bba|Hello...");
  EXPECT_EQ(render("{{ '%s=%d'|format('x', 3) }}|{{ '<p>a <b>b</b></p>'|striptags }}"), "x=3|a b");
}

TEST(ChatFilters, NumberFilters) {
  EXPECT_EQ(render("{{ '42'|int }}{{ '4.7'|int }}{{ 'x'|int(7) }}{{ '0x1A'|int(0, 16) }}"),
            "424726");
  EXPECT_EQ(
      render("{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 42.55|round(1, 'floor') }}"),
      "2.0 4.0 2.67 42.5");
  EXPECT_EQ(render("{{ [1, 2, 3]|sum }} {{ -3|abs }} {{ '1.5'|float }} {{ 'x'|float }}"),
            "6 3 1.5 0.0");
}

TEST(ChatFilters, SequenceFilters) {
  EXPECT_EQ(render("{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ []|first is defined }}"),
            "13False");
  EXPECT_EQ(render("{{ 'héllo'|reverse }}|{{ [1, 2]|reverse|list }}|{{ 'ab'|list }}"),
            "olléh|[2, 1]|['a', 'b']");
  EXPECT_EQ(render("{{ range(5)|batch(2)|list }}|{{ range(5)|slice(2)|list }}"),
            "[[0, 1], [2, 3], [4]]|[[0, 1, 2], [3, 4]]");
  EXPECT_EQ(render("{{ {'a': 1}|items|list }}|{{ 'x'|items }}"),
            "ERROR: chat template: line 1, column 34: Can only get item pairs from a mapping.");
  EXPECT_EQ(render("{{ [3, 1]|min }}{{ [3, 1]|max }}{{ []|max is defined }}"), "13False");
}

TEST(ChatTests, IsTestsFollowJinja) {
  EXPECT_EQ(render("{{ 'a' is string }}{{ {} is mapping }}{{ {} is sequence }}{{ 1 is sequence }}"
                   "{{ missing is sequence }}{{ none is iterable }}{{ true is number }}"
                   "{{ true is integer }}{{ 1.0 is float }}{{ none is none }}"),
            "TrueTrueTrueFalseTrueFalseTrueFalseTrueTrue");
  EXPECT_EQ(render("{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is eq 1 }}{{ 2 is gt 1 }}"
                   "{{ 'ab' is lower }}{{ 'upper' is filter }}{{ 'odd' is test }}"),
            "TrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ x is frobnicated }}"),
            "ERROR: chat template: line 1, column 9: unknown test 'frobnicated' — pass "
            "--chat-template FILE or a built-in name (gemma4, chatml, llama3)");
}

TEST(ChatMethods, StringMethodsFollowPython) {
  EXPECT_EQ(render("{{ ' a  b '.split() }}{{ 'a,b,c'.rsplit(',', 1) }}{{ 'x\r\ny'.splitlines() }}"),
            "['a', 'b']['a,b', 'c']['x', 'y']");
  EXPECT_EQ(render("{{ 'abc'.startswith(('x', 'a')) }}{{ 'héllo'.find('l') }}{{ 'aXa'.count('a') }}"
                   "{{ 'a:b'.partition(':') }}"),
            "True22('a', ':', 'b')");
  EXPECT_EQ(render("{{ '{0}-{name}-{:>3}'.format('x', name='n') }}"),
            "ERROR: chat template: line 1, column 4: cannot switch from manual field "
            "specification to automatic field numbering");
  EXPECT_EQ(render("{{ '{}|{:.2f}|{:>4}|{!r}'.format(1, 2.5, 'x', 'q') }}"), "1|2.50|   x|'q'");
  EXPECT_EQ(render("{{ '%s|%05.1f|%(x)s' % ('a', 3.14159, 1) }}"),
            "ERROR: chat template: line 1, column 4: format requires a mapping");
  EXPECT_EQ(render("{{ 'abc'.encode() }}"),
            "ERROR: chat template: line 1, column 4: unsupported method str.encode() — pass "
            "--chat-template FILE or a built-in name (gemma4, chatml, llama3)");
}

TEST(ChatMethods, DictMethods) {
  ordered_json d = {{"a", 1}, {"b", 2}};
  EXPECT_EQ(render("{{ d.get('a') }}{{ d.get('z', 0) }}{{ d.get('z') }}{{ d.items()|list }}"
                   "{{ d.keys()|list }}{{ d.values()|list }}",
                   {{"d", d}}),
            "10None[('a', 1), ('b', 2)]['a', 'b'][1, 2]");
}

}  // namespace
