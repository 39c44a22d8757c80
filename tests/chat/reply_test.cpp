// Reading replies back: Gemma 4's argument syntax as JSON, tool calls in the three syntaxes and
// the reasoning channel, on hand-written model outputs whose expected reading is written out by
// hand. Every stream is also fed split at every byte (and one byte at a time) and must read the
// same as when fed whole.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/gemma_arguments.h"
#include "chat/output_format.h"
#include "chat/reply.h"
#include "chat/template.h"

namespace {

using nlohmann::json;

// The JSON a whole argument text reads as, or "" when the reader refuses it or it is unfinished.
std::string gemma_to_json(std::string_view text) {
  chat::GemmaArgumentReader reader;
  std::string out;
  for (char c : text) {
    if (!reader.push(c, out)) return "";
  }
  return reader.complete() ? out : "";
}

TEST(GemmaArguments, ReadsAsJson) {
  struct Case {
    const char* gemma;
    const char* json;
  };
  const Case cases[] = {
      {R"({city:<|"|>Paris<|"|>,days:2})", R"({"city":"Paris","days":2})"},
      {"{}", "{}"},
      {R"({a:[],b:{},c:<|"|><|"|>})", R"({"a":[],"b":{},"c":""})"},
      {R"({a:{b:[1,2,{c:<|"|>x<|"|>}]},d:true,e:null,f:-1.5e3})",
       R"({"a":{"b":[1,2,{"c":"x"}]},"d":true,"e":null,"f":-1.5e3})"},
      // Strings hold braces, quotes, backslashes, commas, colons and pieces of the delimiter.
      {R"({q:<|"|>{a:1}, "x" \ y: <|" <| <|"| <<|"|>})",
       R"({"q":"{a:1}, \"x\" \\ y: <|\" <| <|\"| <"})"},
      {"{s:<|\"|>line\none\ttab\x01<|\"|>}", R"({"s":"line\none\ttab\u0001"})"},
      {"{s:<|\"|>h\xC3\xA9llo \xF0\x9F\x98\x80<|\"|>}",
       "{\"s\":\"h\xC3\xA9llo \xF0\x9F\x98\x80\"}"},
      // Keys written between delimiters, and keys that need escaping in JSON.
      {R"({<|"|>my key<|"|>:1,a"b:2})", R"({"my key":1,"a\"b":2})"},
      // Whitespace around a bare key is JSON whitespace before it and part of the key after it.
      {"{ a : 1 , b :[ 1 , 2 ] }", R"({ "a ": 1 , "b ":[ 1 , 2 ] })"},
  };
  for (const auto& c : cases) {
    const std::string got = gemma_to_json(c.gemma);
    ASSERT_FALSE(got.empty()) << c.gemma;
    EXPECT_EQ(json::parse(got), json::parse(c.json)) << c.gemma << " read as " << got;
  }
}

TEST(GemmaArguments, RefusesMalformedArguments) {
  for (const char* bad :
       {"{a:1,}", "{a}", "{:1}", "{a:<|x|>}", "[1]", "x", "{a:1}}", "{a:1,,b:2}", "{a:[1,]}",
        "{a:\"x\"}", "{a:1 b:2}", "{a:<|\"|>x<|\"|>y}", "{<|\"|>k<|\"|>1}"}) {
    chat::GemmaArgumentReader reader;
    std::string out;
    bool ok = true;
    for (char c : std::string_view(bad)) ok = ok && reader.push(c, out);
    EXPECT_FALSE(ok && reader.complete()) << bad;
  }
  // Unfinished is not complete.
  EXPECT_EQ(gemma_to_json(R"({a:<|"|>x<|")"), "");
  EXPECT_EQ(gemma_to_json("{a:{b:1}"), "");
}

TEST(GemmaArguments, WithoutSpaceOnlyStringsHoldWhitespace) {
  // As Gemma 4 writes calls: no whitespace between tokens (what a constraint enforces).
  auto strict = [](std::string_view text) {
    chat::GemmaArgumentReader reader(/*allow_space=*/false);
    std::string out;
    for (char c : text) {
      if (!reader.push(c, out)) return std::string("refused");
    }
    return out;
  };
  EXPECT_EQ(strict(R"({a:<|"|>x y<|"|>,b:[1,2]})"), R"({"a":"x y","b":[1,2]})");
  for (const char* spaced : {"{ a:1}", "{a: 1}", "{a:1 }", "{a:[1, 2]}", "{a:1,\nb:2}"}) {
    EXPECT_EQ(strict(spaced), "refused") << spaced;
  }
}

TEST(GemmaArguments, HoldsAPossibleDelimiterInsideAString) {
  chat::GemmaArgumentReader reader;
  std::string out;
  for (char c : std::string_view(R"({a:<|"|>x<|")")) ASSERT_TRUE(reader.push(c, out));
  EXPECT_EQ(out, R"({"a":"x)");
  EXPECT_EQ(reader.held(), "<|\"");
  ASSERT_TRUE(reader.push('!', out));  // not the delimiter: the held bytes were text
  EXPECT_EQ(out, R"({"a":"x<|\"!)");
  EXPECT_EQ(reader.held(), "");
}

// The whole reading of a reply: what a client ends up with.
struct Reading {
  std::string reasoning, content;
  std::vector<chat::ToolCall> calls;  // as assembled from the deltas
  bool malformed = false;
  bool operator==(const Reading& o) const {
    if (reasoning != o.reasoning || content != o.content || calls.size() != o.calls.size())
      return false;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].id != o.calls[i].id || calls[i].name != o.calls[i].name ||
          calls[i].arguments != o.calls[i].arguments) {
        return false;
      }
    }
    return malformed == o.malformed;
  }
};

std::ostream& operator<<(std::ostream& os, const Reading& r) {
  os << "reasoning=" << json(r.reasoning) << " content=" << json(r.content) << " calls=[";
  for (const auto& c : r.calls) os << c.id << ":" << c.name << json(c.arguments) << " ";
  return os << "] malformed=" << r.malformed;
}

void apply(Reading& r, const chat::ReplyDelta& d) {
  r.reasoning += d.reasoning;
  r.content += d.content;
  for (const auto& t : d.tool_calls) {
    if (!t.name.empty()) {
      ASSERT_EQ(t.index, static_cast<int>(r.calls.size()))
          << "a call's first delta opens the next index";
      r.calls.push_back({t.id, t.name, t.arguments});
    } else {
      ASSERT_LT(t.index, static_cast<int>(r.calls.size())) << "arguments before the call's header";
      r.calls[t.index].arguments += t.arguments;
    }
  }
}

// Reads `text` cut into the given pieces.
Reading read(const chat::ReplyOptions& options, const std::vector<std::string_view>& pieces) {
  chat::ReplyParser parser(options);
  Reading r;
  for (auto piece : pieces) apply(r, parser.push(piece));
  apply(r, parser.finish());
  r.malformed = parser.saw_malformed_call();
  return r;
}

// Reads `text` whole, then split at every byte and one byte at a time; all must agree.
Reading read_every_way(const chat::ReplyOptions& options, std::string_view text) {
  const Reading whole = read(options, {text});
  for (size_t cut = 1; cut < text.size(); ++cut) {
    EXPECT_EQ(read(options, {text.substr(0, cut), text.substr(cut)}), whole)
        << "split at byte " << cut;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  EXPECT_EQ(read(options, bytes), whole) << "one byte at a time";
  return whole;
}

chat::ReplyOptions gemma_tools() {
  return {.format = chat::output_format_of(*chat::builtin_template("gemma4")), .parse_tools = true};
}

TEST(ReplyGemma4, OneCallWithTextBeforeAndAfter) {
  const Reading r = read_every_way(
      gemma_tools(),
      R"(Let me check.<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:2}<tool_call|>Done.)");
  EXPECT_EQ(r.content, "Let me check.Done.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].id, "call_0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city":"Paris","days":2})"));
  EXPECT_FALSE(r.malformed);
}

TEST(ReplyGemma4, SeveralCallsNestedValuesAndDelimitersInStrings) {
  const Reading r = read_every_way(
      gemma_tools(),
      "<|tool_call>call:search{query:<|\"|>a {b} <tool_call|> \"c\" "
      "<|tool_call><|\"|>,filters:{tags:[<|\"|>x<|\"|>,"
      "<|\"|>y<|\"|>],max:3,exact:false}}<tool_call|><|tool_call>call:noop{}<tool_call|>");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "search");
  EXPECT_EQ(json::parse(r.calls[0].arguments),
            json::parse(R"({"query":"a {b} <tool_call|> \"c\" <|tool_call>",
                            "filters":{"tags":["x","y"],"max":3,"exact":false}})"));
  EXPECT_EQ(r.calls[1].id, "call_1");
  EXPECT_EQ(r.calls[1].name, "noop");
  EXPECT_EQ(r.calls[1].arguments, "{}");
}

TEST(ReplyGemma4, MalformedCallsAreContentNeverLost) {
  const std::string texts[] = {
      R"(Hi <|tool_call>call:f{a:1,}<tool_call|> there)",  // trailing comma
      R"(<|tool_call>cal:f{a:1}<tool_call|>)",             // not "call:"
      R"(<|tool_call>call:{a:1}<tool_call|>)",             // no name
      R"(<|tool_call>call:f g{a:1}<tool_call|>)",          // a space in the name
      R"(<|tool_call>call:f{a:<|"|>x<|"|>}<tool_call>)",   // wrong close marker
      R"(<|tool_call>call:f{a:<|"|>unfinished)",           // the output ends inside the call
  };
  for (const std::string& text : texts) {
    const Reading r = read_every_way(gemma_tools(), text);
    EXPECT_EQ(r.content, text) << text;
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_TRUE(r.malformed) << text;
  }
  // A malformed call does not hide a good one after it.
  const Reading r =
      read_every_way(gemma_tools(), R"(<|tool_call>call:f{a:}<|tool_call>call:g{b:2}<tool_call|>)");
  EXPECT_EQ(r.content, "<|tool_call>call:f{a:}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "g");
  EXPECT_EQ(r.calls[0].id, "call_0");
}

TEST(ReplyGemma4, WhitespaceAroundCallsIsContentOnlyBeforeText) {
  const std::string call = R"(<|tool_call>call:f{}<tool_call|>)";
  Reading r = read_every_way(gemma_tools(), call + "\n" + call + "\n\n");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.calls.size(), 2u);
  r = read_every_way(gemma_tools(), " " + call + "\n Done.");
  EXPECT_EQ(r.content, " \n Done.");
}

TEST(ReplyGemma4, TextThatOnlyLooksLikeAMarkerIsContent) {
  const std::string text = "a <|tool b <|tool_cal <| <|tool_call";
  const Reading r = read_every_way(gemma_tools(), text);
  // The last one is unfinished: the output ended inside what could have been the marker.
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_FALSE(r.malformed);
}

TEST(ReplyGemma4, WithoutToolsNothingIsACall) {
  auto options = gemma_tools();
  options.parse_tools = false;
  const std::string text = R"(<|tool_call>call:f{a:1}<tool_call|>)";
  EXPECT_EQ(read_every_way(options, text).content, text);
}

TEST(ReplyGemma4, EagerCallsStreamTheirArgumentsAndStayWhenCutShort) {
  auto options = gemma_tools();
  options.eager_calls = true;
  chat::ReplyParser parser(options);
  auto d = parser.push("<|tool_call>call:f{a:");
  ASSERT_EQ(d.tool_calls.size(), 2u);  // the header as soon as the name is known, then "{"
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].id, "call_0");
  EXPECT_EQ(d.tool_calls[1].arguments, "{\"a\":");
  d = parser.push("<|\"|>x");  // the quote comes at the delimiter's first byte
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "\"x");
  d = parser.finish();  // max_tokens cut the call: it stays a call with partial arguments
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(parser.calls().size(), 1u);
  EXPECT_EQ(parser.calls()[0].arguments, "{\"a\":\"x");
  // Fed whole or byte by byte, an eager reading of a finished call equals the held one.
  const std::string text = R"(<|tool_call>call:f{a:<|"|>x<|"|>,b:[1]}<tool_call|>)";
  auto held = read_every_way(gemma_tools(), text);
  EXPECT_EQ(read_every_way(options, text), held);
}

chat::ReplyOptions hermes_tools() {
  return {.format = chat::output_format_of(*chat::builtin_template("chatml")), .parse_tools = true};
}

TEST(ReplyHermes, CallsInTagsWithTheCloseMarkerInsideAString) {
  const Reading r = read_every_way(
      hermes_tools(),
      "Sure.\n<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"q\": \"</tool_call> {\\\"\", "
      "\"n\": [1, {\"k\": null}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", "
      "\"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>");
  EXPECT_EQ(r.content, "Sure.\n");  // the newline between the calls is not content
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "lookup");
  EXPECT_EQ(json::parse(r.calls[0].arguments),
            json::parse(R"({"q":"</tool_call> {\"","n":[1,{"k":null}]})"));
  EXPECT_EQ(r.calls[1].name, "g");
  EXPECT_EQ(json::parse(r.calls[1].arguments),
            json::parse(R"({"x":1})"));  // arguments given as a string
}

TEST(ReplyHermes, MalformedJsonIsContent) {
  for (const std::string text :
       {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
        "<tool_call>\nnot json</tool_call>"}) {
    const Reading r = read_every_way(hermes_tools(), text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_TRUE(r.malformed);
  }
}

TEST(ReplyLlama3, AJsonReplyIsACallOnlyWhenItNamesOne) {
  const chat::ReplyOptions options{
      .format = chat::output_format_of(*chat::builtin_template("llama3")), .parse_tools = true};
  Reading r = read_every_way(options, "  {\"name\": \"f\", \"parameters\": {\"a\": \"}\"}}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"a":"}"})"));
  EXPECT_EQ(r.content, "");
  r = read_every_way(options, "{\"answer\": 42}");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "{\"answer\": 42}");
  r = read_every_way(options, "Use {\"name\": \"f\", \"parameters\": {}}");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "Use {\"name\": \"f\", \"parameters\": {}}");
}

chat::ReplyOptions gemma_thinking() {
  return {.format = chat::output_format_of(*chat::builtin_template("gemma4")), .parse_tools = true};
}

TEST(ReplyReasoning, GemmaThoughtChannelIsReasoning) {
  Reading r = read_every_way(
      gemma_thinking(), "<|channel>thought\nFirst, 2+2.\nIt is 4.\n<channel|>The answer is 4.");
  EXPECT_EQ(r.reasoning, "First, 2+2.\nIt is 4.");
  EXPECT_EQ(r.content, "The answer is 4.");
  // An empty channel (thinking off) leaves nothing; an unclosed one (cut short) is all reasoning.
  r = read_every_way(gemma_thinking(), "<|channel>thought\n<channel|>Hi");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Hi");
  r = read_every_way(gemma_thinking(), "<|channel>thought\nStill thinking <chan");
  EXPECT_EQ(r.reasoning, "Still thinking <chan");
  EXPECT_EQ(r.content, "");
}

TEST(ReplyReasoning, ThinkingThenACall) {
  const Reading r = read_every_way(gemma_thinking(), R"(<|channel>thought
Need the weather.<channel|><|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>)");
  EXPECT_EQ(r.reasoning, "Need the weather.");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city":"Oslo"})"));
}

TEST(ReplyReasoning, ThinkTagsAndPromptsThatOpenTheChannel) {
  chat::ReplyOptions options;
  options.format.reasoning.open = "<think>";
  options.format.reasoning.close = "</think>";
  Reading r = read_every_way(options, "<think>\nhmm\n</think>\n\nYes.");
  EXPECT_EQ(r.reasoning, "hmm");
  EXPECT_EQ(r.content, "Yes.");
  EXPECT_TRUE(chat::prompt_opens_reasoning("<|Assistant|><think>\n", options.format.reasoning));
  EXPECT_FALSE(chat::prompt_opens_reasoning("<|Assistant|>", options.format.reasoning));
  options.starts_in_reasoning = true;
  r = read_every_way(options, "hmm</think>Yes.");
  EXPECT_EQ(r.reasoning, "hmm");
  EXPECT_EQ(r.content, "Yes.");
}

TEST(OutputFormat, RecognisesTheBuiltInTemplates) {
  auto gemma = chat::output_format_of(*chat::builtin_template("gemma4"));
  EXPECT_EQ(gemma.tools, chat::ToolSyntax::kGemma4);
  EXPECT_EQ(gemma.reasoning.open, "<|channel>");
  EXPECT_TRUE(gemma.reasoning.named_channel);
  EXPECT_EQ(chat::output_format_of(*chat::builtin_template("chatml")).tools,
            chat::ToolSyntax::kHermes);
  EXPECT_EQ(chat::output_format_of(*chat::builtin_template("llama3")).tools,
            chat::ToolSyntax::kLlama3);
  EXPECT_EQ(chat::output_format_of("{% for m in messages %}{{ m.content }}{% endfor %}").tools,
            chat::ToolSyntax::kNone);
}

}  // namespace
