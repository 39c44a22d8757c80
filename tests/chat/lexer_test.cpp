// Whitespace control and lexing: trim_blocks, lstrip_blocks, -/+ markers, raw, newlines, errors.
#include "chat/lexer.h"

#include <gtest/gtest.h>

#include "chat_testing.h"

namespace {

using chat_testing::render;

TEST(ChatLexer, TrimBlocksEatsOneNewlineAfterABlockTagOnly) {
  EXPECT_EQ(render("{% if true %}\na\n{% endif %}\nb"), "a\nb");
  EXPECT_EQ(render("{% if true %}\n\na{% endif %}"), "\na");  // only the first newline
  EXPECT_EQ(render("{{ 'x' }}\ny"), "x\ny");                  // not after {{ }}
  EXPECT_EQ(render("{# note #}\ny"), "y");                    // comments count as blocks
}

TEST(ChatLexer, LstripBlocksRemovesIndentationBeforeBlockTagsOnly) {
  EXPECT_EQ(render("  {% if true %}a{% endif %}"), "a");
  EXPECT_EQ(render("x\n    {% if true %}a{% endif %}"), "x\na");
  EXPECT_EQ(render("  {{ 'v' }}"), "  v");                    // not before {{ }}
  EXPECT_EQ(render("x  {% if true %}a{% endif %}"), "x  a");  // text before the tag: kept
  EXPECT_EQ(render("\t {# c #}\nz"), "z");
}

TEST(ChatLexer, MinusMarkersStripAllWhitespaceIncludingNewlines) {
  EXPECT_EQ(render("a  \n\n  {%- if true -%}  \n\n b{% endif %}"), "ab");
  EXPECT_EQ(render("a {{- ' x ' -}} b"), "a x b");
  EXPECT_EQ(render("a\n{#- comment -#}\nb"), "ab");
}

TEST(ChatLexer, PlusMarkersDisableLstripAndTrim) {
  EXPECT_EQ(render("  {%+ if true %}a{% endif %}"), "  a");
  EXPECT_EQ(render("{% if true +%}\na{% endif %}"), "\na");
}

TEST(ChatLexer, OneTrailingNewlineIsDroppedAndCrLfIsNormalised) {
  EXPECT_EQ(render("a\n"), "a");
  EXPECT_EQ(render("a\n\n"), "a\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(ChatLexer, RawBlocksAreNotInterpreted) {
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
  EXPECT_EQ(render(" {%- raw -%} {{ y }} {%- endraw -%} ."), "{{ y }}.");
}

TEST(ChatLexer, StringLiteralsUsePythonEscapes) {
  EXPECT_EQ(render(R"({{ 'a\tb\n\u00e9\x41\101' }})"),
            "a\tb\né"
            "AA");
  EXPECT_EQ(render(R"({{ "it's" ~ '\'' ~ "\d" }})"), "it's'\\d");
  EXPECT_EQ(render("{{ 'adjacent' ' literals' }}"), "adjacent literals");
}

TEST(ChatLexer, NumbersFollowJinjaLiterals) {
  EXPECT_EQ(render("{{ 1_000 }} {{ 0x1f }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 2e-3 }}"),
            "1000 31 15 5 1500.0 0.002");
  EXPECT_EQ(render("{{ [10, 20].1 }}"), "20");
}

TEST(ChatLexer, ErrorsNameLineAndColumn) {
  auto tokens = chat::tokenize("ok\n  {{ 'open", {});
  ASSERT_FALSE(tokens);
  EXPECT_EQ(tokens.error().message(), "line 2, column 6: unterminated string literal");
  EXPECT_EQ(render("a\n{# never closed"),
            "ERROR: chat template: line 2, column 1: missing end of comment tag '#}'");
  EXPECT_EQ(render("{{ (1 ]}}"),
            "ERROR: chat template: line 1, column 7: unexpected ']', "
            "expected ')'");
  EXPECT_EQ(render("{{ 1 $ 2 }}"),
            "ERROR: chat template: line 1, column 6: unexpected character '$'");
}

}  // namespace
