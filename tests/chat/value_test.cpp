// Python value semantics: float printing, repr of containers and strings, truthiness, equality.
#include "chat/value.h"

#include <gtest/gtest.h>

#include <cmath>

#include "chat_testing.h"

namespace {

using chat::Value;
using chat_testing::render;

TEST(ChatValue, FloatsPrintLikePythonRepr) {
  EXPECT_EQ(chat::python_float(0.1), "0.1");
  EXPECT_EQ(chat::python_float(1.0), "1.0");
  EXPECT_EQ(chat::python_float(100.0), "100.0");
  EXPECT_EQ(chat::python_float(-0.0), "-0.0");
  EXPECT_EQ(chat::python_float(1e16), "1e+16");
  EXPECT_EQ(chat::python_float(1e15), "1000000000000000.0");
  EXPECT_EQ(chat::python_float(1.5e-5), "1.5e-05");
  EXPECT_EQ(chat::python_float(0.0001), "0.0001");
  EXPECT_EQ(chat::python_float(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(chat::python_float(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(chat::python_float(std::nan("")), "nan");
  EXPECT_EQ(chat::python_float(-INFINITY), "-inf");
}

TEST(ChatValue, StringReprPicksQuotesAndEscapesLikePython) {
  EXPECT_EQ(chat::repr_string("plain"), "'plain'");
  EXPECT_EQ(chat::repr_string("it's"), "\"it's\"");
  EXPECT_EQ(chat::repr_string("both ' and \""), "'both \\' and \"'");
  EXPECT_EQ(chat::repr_string("tab\tnl\nback\\"), "'tab\\tnl\\nback\\\\'");
  EXPECT_EQ(chat::repr_string("\x01\x7f"), "'\\x01\\x7f'");
  EXPECT_EQ(chat::repr_string("\u00a0\u200b"), "'\\xa0\\u200b'");
  EXPECT_EQ(chat::repr_string("é😀"), "'é😀'");  // printable non-ASCII stays as is
}

TEST(ChatValue, ContainersPrintWithReprInsideAndStrOutside) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 2.50, {'k': (1,)}] }}"),
            "[1, 'a', None, True, 2.5, {'k': (1,)}]");
  EXPECT_EQ(render("{{ 'a' }}{{ none }}{{ true }}{{ 3.0 }}{{ () }}{{ (1, 2) }}"),
            "aNoneTrue3.0()(1, 2)");
  EXPECT_EQ(render("{{ d.items() }} {{ d.keys() }} {{ range(2) }}", {{"d", {{"a", 1}}}}),
            "dict_items([('a', 1)]) dict_keys(['a']) range(0, 2)");
  EXPECT_EQ(render("{{ [undefined_name] }}|{{ undefined_name }}|"), "[Undefined]||");
}

TEST(ChatValue, TruthinessAndEqualityFollowPython) {
  EXPECT_FALSE(chat::truthy(Value()));
  EXPECT_FALSE(chat::truthy(Value::none()));
  EXPECT_FALSE(chat::truthy(Value::string("")));
  EXPECT_FALSE(chat::truthy(Value::number(0.0)));
  EXPECT_FALSE(chat::truthy(Value::list({})));
  EXPECT_TRUE(chat::truthy(Value::list({}, chat::ListKind::Generator)));  // generators are objects
  EXPECT_TRUE(chat::equals(Value::integer(1), Value::number(1.0)));
  EXPECT_TRUE(chat::equals(Value::boolean(true), Value::integer(1)));
  EXPECT_FALSE(chat::equals(Value::list({Value::integer(1)}),
                            Value::list({Value::integer(1)}, chat::ListKind::Tuple)));
  EXPECT_TRUE(chat::equals(Value(), Value()));  // Undefined == Undefined
  EXPECT_FALSE(chat::equals(Value(), Value::none()));
}

TEST(ChatValue, JsonObjectsKeepTheirKeyOrder) {
  auto j = nlohmann::ordered_json::parse(R"({"zeta": 1, "alpha": {"y": 2, "b": 3}})");
  EXPECT_EQ(chat::to_str(*chat::from_json(j)), "{'zeta': 1, 'alpha': {'y': 2, 'b': 3}}");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}|{{ d|tojson }}", {{"d", j}}),
            "zetaalpha|{\"zeta\": 1, \"alpha\": {\"y\": 2, \"b\": 3}}");
}

TEST(ChatValue, MarkupEscapesWhatItIsConcatenatedWith) {
  // Markup + str escapes the str (functionary v3.1 relies on this); ~ gives a plain str.
  EXPECT_EQ(
      render("{{ ('<b>'|safe) + '<i>' }}|{{ '<i>' + ('&'|safe) }}|{{ ('<b>'|safe) ~ '<i>' }}"),
      "<b>&lt;i&gt;|&lt;i&gt;&|<b><i>");
  EXPECT_EQ(render("{{ 'a\"b'|e }}|{{ ('x'|safe)|e }}"), "a&#34;b|x");
}

}  // namespace
