// Structured output: the regex subset, the schema automaton (documents accepted / refused by
// hand-written JSON Schema truth), refusals naming the feature, and token masks on real
// vocabularies checked token by token against feeding each token's bytes to the automaton.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "gguf/file.h"
#include "sample/constraint.h"
#include "sample/json_schema.h"
#include "sample/regex.h"
#include "testing/testing.h"
#include "vocabularies.h"

namespace {

using nlohmann::ordered_json;

sample::Grammar grammar(const std::string& schema) {
  auto g = sample::compile_json_schema(ordered_json::parse(schema));
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message());
  return g.ok() ? std::move(*g) : sample::any_json_object_grammar();
}

// Whether the whole document is accepted, checking on the way that every prefix stays alive.
bool accepts(const sample::Grammar& g, std::string_view doc) {
  sample::GrammarState s(&g);
  for (char c : doc) {
    if (!s.feed(static_cast<uint8_t>(c))) return false;
  }
  return s.complete();
}

TEST(Regex, MatchesLikePythonFullmatch) {
  // Truth: Python re.fullmatch (search=false) on the same strings.
  struct Case {
    const char* pattern;
    const char* text;
    bool match;
  };
  const Case cases[] = {
      {"[a-z]+", "hello", true},
      {"[a-z]+", "Hello", false},
      {"[a-z]+", "", false},
      {"\\d{3}-\\d{4}", "555-1234", true},
      {"\\d{3}-\\d{4}", "55-1234", false},
      {"(ab|cd)*e?", "abcdab", true},
      {"(ab|cd)*e?", "abce", false},
      {"(ab|cd)*e?", "cde", true},
      {"a{2,3}", "a", false},
      {"a{2,3}", "aaa", true},
      {"a{2,3}", "aaaa", false},
      {"a{2,}", "aaaaa", true},
      {"[^0-9]x", "ax", true},
      {"[^0-9]x", "5x", false},
      {"[^0-9]x", "éx", true},
      {"\\w+@\\w+\\.com", "me@ex.com", true},
      {".", "\n", false},
      {".", "€", true},
      {"colou?r", "color", true},
      {"(?:x|y)z", "yz", true},
      {"[\\d.]+", "3.14", true},
      {"\\u00e9", "é", true},
  };
  for (const auto& c : cases) {
    auto re = sample::Regex::compile(c.pattern, false);
    ASSERT_TRUE(re.ok()) << c.pattern << ": " << re.error().message();
    EXPECT_EQ(re->matches(c.text), c.match) << c.pattern << " on " << c.text;
  }
}

TEST(Regex, SearchSemanticsAndAnchors) {
  // JSON Schema patterns are unanchored: re.search.
  auto re = sample::Regex::compile("b+c", true);
  ASSERT_TRUE(re.ok());
  EXPECT_TRUE(re->matches("abbcd"));
  EXPECT_FALSE(re->matches("acd"));
  auto anchored = sample::Regex::compile("^b+c$", true);
  ASSERT_TRUE(anchored.ok());
  EXPECT_FALSE(anchored->matches("abbc"));
  EXPECT_TRUE(anchored->matches("bbc"));
}

TEST(Regex, RefusesWhatItCannotDoExactly) {
  for (const char* p :
       {"(?=a)b", "(a)\\1", "a\\bb", "a^b", "(?i)a", "[[:alpha:]]", "\\p{L}", "[^\\d]", "a**"}) {
    auto re = sample::Regex::compile(p, true);
    EXPECT_FALSE(re.ok()) << p;
  }
  // Only a quote can follow "a": no string writable without escapes matches.
  EXPECT_FALSE(sample::Regex::compile("^a\"$", true).ok());
}

TEST(Schema, ObjectsRequiredOptionalAndOrder) {
  const auto g =
      grammar(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                            "tags":{"type":"array","items":{"type":"string"},"maxItems":2}},"required":["name"]})");
  EXPECT_TRUE(accepts(g, R"({"name":"Ann"})"));
  EXPECT_TRUE(accepts(g, R"({"name":"Ann","age":3,"tags":["a","b"]})"));
  EXPECT_TRUE(accepts(g, R"({"name":"Ann","tags":[]})"));
  EXPECT_TRUE(accepts(g, "{\n  \"name\": \"Ann\",\n  \"age\": -12\n}"));
  EXPECT_FALSE(accepts(g, R"({"age":3})")) << "name is required";
  EXPECT_FALSE(accepts(g, R"({"name":"Ann","tags":["a","b","c"]})")) << "maxItems 2";
  EXPECT_FALSE(accepts(g, R"({"name":"Ann","extra":1})"))
      << "no additionalProperties when properties are listed";
  EXPECT_FALSE(accepts(g, R"({"name":"Ann","age":3.5})")) << "integer";
  EXPECT_FALSE(accepts(g, R"({"name":"Ann","age":01})")) << "leading zero is not JSON";
  EXPECT_FALSE(accepts(g, R"({"age":3,"name":"Ann"})")) << "policy: declared order";
  EXPECT_FALSE(accepts(g, R"({"name":"Ann",})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Ann")"));
  EXPECT_FALSE(accepts(g, R"( {"name":"Ann"})")) << "policy: no leading whitespace";
  EXPECT_FALSE(accepts(g, "{\"name\":  \"Ann\"}")) << "policy: at most one space";
}

TEST(Schema, AdditionalPropertiesExcludeDeclaredKeys) {
  const auto g = grammar(R"({"type":"object","properties":{"a":{"type":"integer"}},
                            "additionalProperties":{"type":"boolean"}})");
  EXPECT_TRUE(accepts(g, R"({"a":1,"ab":true,"b":false})"));
  EXPECT_TRUE(accepts(g, R"({"ab":true})"));
  EXPECT_FALSE(accepts(g, R"({"ab":1})"));
  EXPECT_FALSE(accepts(g, R"({"b":true,"a":true})")) << "a declared key is never an additional one";
  const auto any_object = grammar(R"({"type":"object"})");
  EXPECT_TRUE(accepts(any_object, R"({"x":[1,{"y":null}],"z":"\u00e9\n"})"));
  EXPECT_FALSE(accepts(any_object, R"([1])"));
}

TEST(Schema, StringsLengthsEscapesAndUtf8) {
  const auto g = grammar(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(accepts(g, R"("a")"));
  EXPECT_TRUE(accepts(g, R"("ab")"));
  EXPECT_TRUE(accepts(g, "\"h\xC3\xA9!\""));  // é counts as one code point
  EXPECT_TRUE(accepts(g, R"("a\n\u00e9")"));  // escapes count as one each
  EXPECT_FALSE(accepts(g, R"("abcd")"));
  EXPECT_FALSE(accepts(g, "\"a\x01\""));         // raw control character
  EXPECT_FALSE(accepts(g, "\"a\xC3\""));         // cut UTF-8
  EXPECT_FALSE(accepts(g, "\"\xED\xA0\x80\""));  // surrogate in UTF-8
  EXPECT_FALSE(accepts(g, R"("\ud800x")"));      // lone surrogate escape
  EXPECT_FALSE(accepts(g, R"("\q")"));
  // maxLength reached forces the closing quote: the only live byte.
  sample::GrammarState s(&g);
  ASSERT_TRUE(s.feed(std::string_view("\"abc")));
  for (int b = 0; b < 256; ++b) {
    sample::GrammarState t = s;
    EXPECT_EQ(t.feed(static_cast<uint8_t>(b)), b == '"') << b;
  }
}

TEST(Schema, FormatsAndPatterns) {
  const auto date = grammar(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(accepts(date, R"("2024-02-28")"));
  EXPECT_FALSE(accepts(date, R"("2024-02-30")"));
  EXPECT_FALSE(accepts(date, R"("2024-13-01")"));
  const auto dt = grammar(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(accepts(dt, R"("2024-05-01T12:30:00Z")"));
  EXPECT_TRUE(accepts(dt, R"("2024-05-01T12:30:00.25+02:00")"));
  EXPECT_FALSE(accepts(dt, R"("2024-05-01 12:30:00Z")"));
  const auto uuid = grammar(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(accepts(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(accepts(uuid, R"("123e4567e89b12d3a456426614174000")"));
  const auto email = grammar(R"({"type":"string","format":"email"})");
  EXPECT_TRUE(accepts(email, R"("a.b@example.com")"));
  EXPECT_FALSE(accepts(email, R"("a.b@example")"));
  const auto pattern = grammar(R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})");
  EXPECT_TRUE(accepts(pattern, R"("AB-12")"));
  EXPECT_FALSE(accepts(pattern, R"("AB-")"));
  EXPECT_FALSE(accepts(pattern, R"("ab-12")"));
  const auto search = grammar(R"({"type":"string","pattern":"cat"})");
  EXPECT_TRUE(accepts(search, R"("concatenate")"));
  EXPECT_FALSE(accepts(search, R"("dog")"));
}

TEST(Schema, NumbersAndIntegerBounds) {
  const auto number = grammar(R"({"type":"number"})");
  for (const char* ok : {"0", "-0", "12", "1.5", "-0.25e+10", "3E7"})
    EXPECT_TRUE(accepts(number, ok)) << ok;
  for (const char* bad : {"01", "1.", ".5", "+1", "1e", "--1", "NaN"})
    EXPECT_FALSE(accepts(number, bad)) << bad;
  const auto bounded = grammar(R"({"type":"integer","minimum":-5,"exclusiveMaximum":120})");
  for (int v = -30; v <= 300; ++v) {
    EXPECT_EQ(accepts(bounded, std::to_string(v)), v >= -5 && v < 120) << v;
  }
  EXPECT_TRUE(accepts(bounded, "-0")) << "-0 is 0, within the bounds";
  EXPECT_FALSE(accepts(bounded, "-00"));
  EXPECT_FALSE(accepts(bounded, "1.0")) << "policy: integers are written without a fraction";
}

TEST(Schema, EnumsConstsTypeArraysAnyOfOneOfRefs) {
  const auto e = grammar(R"({"enum":["red","green",1,12,null,{"a":[true]}]})");
  for (const char* ok : {R"("red")", R"("green")", "1", "12", "null", R"({"a":[true]})"})
    EXPECT_TRUE(accepts(e, ok)) << ok;
  for (const char* bad : {R"("blue")", "2", "123", R"({"a":[false]})"})
    EXPECT_FALSE(accepts(e, bad)) << bad;
  const auto c = grammar(R"({"type":"object","properties":{"k":{"const":"v"}},"required":["k"]})");
  EXPECT_TRUE(accepts(c, R"({"k":"v"})"));
  EXPECT_FALSE(accepts(c, R"({"k":"w"})"));
  const auto nullable = grammar(R"({"type":["string","null"],"maxLength":1})");
  EXPECT_TRUE(accepts(nullable, "null"));
  EXPECT_TRUE(accepts(nullable, R"("x")"));
  EXPECT_FALSE(accepts(nullable, R"("xy")"));
  const auto any_of =
      grammar(R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                                            {"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}]})");
  EXPECT_TRUE(accepts(any_of, R"({"a":1})"));
  EXPECT_TRUE(accepts(any_of, R"({"a":"1"})"));
  EXPECT_FALSE(accepts(any_of, R"({"a":true})"));
  const auto one_of = grammar(R"({"oneOf":[{"type":"integer"},{"type":"string"}]})");
  EXPECT_TRUE(accepts(one_of, "7"));
  EXPECT_TRUE(accepts(one_of, R"("7")"));
  const auto tree = grammar(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}}})");
  EXPECT_TRUE(accepts(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"v":1,"kids":[{"kids":[]}]})"));
  const auto defs = grammar(R"({"type":"array","items":{"$ref":"#/definitions/c"},"minItems":1,
                              "definitions":{"c":{"enum":["x","y"]}}})");
  EXPECT_TRUE(accepts(defs, R"(["x","y","x"])"));
  EXPECT_FALSE(accepts(defs, "[]"));
}

TEST(Schema, UnsupportedFeaturesAreRefusedByName) {
  struct Case {
    const char* schema;
    const char* message;
  };
  const Case cases[] = {
      {R"({"type":"object","properties":{"x":{"type":"object","patternProperties":{"a":{}}}}})",
       "schema feature 'patternProperties' at /properties/x is not supported"},
      {R"({"type":"number","multipleOf":2})", "'multipleOf' at /"},
      {R"({"type":"array","prefixItems":[{}]})", "'prefixItems' at /"},
      {R"({"type":"array","items":[{}]})", "'items as an array (tuple validation)'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"array","contains":{}})", "'contains'"},
      {R"({"type":"object","minProperties":1})", "'minProperties'"},
      {R"({"type":"object","propertyNames":{}})", "'propertyNames'"},
      {R"({"type":"object","dependentRequired":{}})", "'dependentRequired'"},
      {R"({"not":{}})", "'not'"},
      {R"({"if":{},"then":{}})", "'if'"},
      {R"({"allOf":[{"type":"string"},{"maxLength":3}]})", "'allOf with more than one schema'"},
      {R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]})",
       "oneOf with branches that may match"},
      {R"({"type":"number","minimum":0})", "'minimum' on type 'number'"},
      {R"({"type":"string","format":"ipv4"})", "'format 'ipv4''"},
      {R"({"type":"string","pattern":"x(?!a)b"})", "pattern feature"},
      {R"({"type":"string","pattern":"a","maxLength":3})",
       "'minLength/maxLength' together with 'pattern'"},
      {R"({"$ref":"https://example.com/s.json"})", "only local"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})",
       "required property 'b' not listed"},
      {R"({"type":"object","properties":{"a":false}})", "'false schema' at /properties/a"},
      {R"({"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}})", "left recursion"},
      {R"({"type":"string","contentEncoding":"base64"})", "'contentEncoding'"},
      {R"({"type":"string","maxLength":1,"minLength":2})", "minLength is above maxLength"},
      {R"({"type":"frog"})", "unknown type 'frog'"},
  };
  auto file = gguf::File::open((testing_util::shared_dir() / "models/stories260K.gguf").string());
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  for (const auto& c : cases) {
    const nlohmann::json rf = {{"type", "json_schema"},
                               {"json_schema", {{"schema", nlohmann::json::parse(c.schema)}}}};
    auto r = sample::compile_response_format(rf, *tok);
    ASSERT_FALSE(r.ok()) << c.schema;
    EXPECT_NE(r.error().message().find(c.message), std::string::npos) << r.error().message();
    EXPECT_EQ(r.error().message().rfind("response_format: ", 0), 0u) << r.error().message();
  }
  EXPECT_FALSE(sample::compile_response_format(nlohmann::json{{"type", "xml"}}, *tok).ok());
  EXPECT_FALSE(sample::compile_response_format(nlohmann::json{{"type", "json_schema"}}, *tok).ok());
  auto text = sample::compile_response_format(nlohmann::json{{"type", "text"}}, *tok);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, nullptr);
}

// ---- Masks on real vocabularies -------------------------------------------------------------

using sample_tests::load_tokenizer;

// The allowed set computed naively: every token's bytes fed to a copy of the automaton.
std::vector<bool> naive_allowed(const tokenizer::Tokenizer& tok, const sample::Grammar& g,
                                std::string_view text) {
  sample::GrammarState state(&g);
  EXPECT_TRUE(state.feed(text));
  // A piece whose first byte is refused is refused whole (a state that refuses a byte is dead), so
  // each first byte is tried once, and one state is reused: the GPT-2 case took 38 s under the
  // sanitizers copying a fresh state for each of its 50k pieces at each step, 30 s so.
  std::array<bool, 256> first_byte_allowed{};
  for (int byte = 0; byte < 256; ++byte) {
    sample::GrammarState t = state;
    first_byte_allowed[byte] = t.feed(static_cast<uint8_t>(byte));
  }
  std::vector<bool> allowed(tok.n_vocab(), false);
  sample::GrammarState piece_state(&g);
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.is_end_of_generation(id)) {
      allowed[id] = state.complete();
      continue;
    }
    const auto type = tok.token_type(id);
    if (type != tokenizer::TokenType::kNormal && type != tokenizer::TokenType::kByte) continue;
    const std::string piece = tok.piece(id);
    if (piece.empty() || !first_byte_allowed[static_cast<uint8_t>(piece[0])]) continue;
    piece_state.assign(state);
    allowed[id] = piece_state.feed(piece);
  }
  return allowed;
}

void check_masks_along_random_walks(const tokenizer::Tokenizer& tok, const char* response_format,
                                    int walks) {
  const auto rf = ordered_json::parse(response_format);
  auto g = rf["type"] == "json_object" ? sample::any_json_object_grammar()
                                       : grammar(rf["json_schema"]["schema"].dump());
  std::mt19937 rng(42);
  for (int w = 0; w < walks; ++w) {
    auto c = sample::compile_response_format(rf, tok);
    ASSERT_TRUE(c.ok()) << c.error().message();
    std::vector<int32_t> generated;
    std::string text;
    for (int step = 0; step < 60; ++step) {
      std::vector<float> logits(tok.n_vocab(), 0.0f);
      (*c)->mask(logits, generated);
      const auto expected = naive_allowed(tok, g, text);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < tok.n_vocab(); ++id) {
        const bool is_allowed = !std::isinf(logits[id]);
        ASSERT_EQ(is_allowed, expected[id])
            << "token " << id << " '" << tok.piece(id) << "' after '" << text << "'";
        if (is_allowed) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty()) << "no token allowed after '" << text << "'";
      const int32_t pick =
          allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      if (tok.is_end_of_generation(pick)) {
        EXPECT_TRUE((*c)->complete(generated));
        break;
      }
      generated.push_back(pick);
      text += tok.piece(pick);
    }
  }
}

constexpr const char* kPersonFormat =
    R"({"type":"json_schema","json_schema":{"schema":{"type":"object",
    "properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":0,"maximum":120},
    "mood":{"enum":["happy","sad"]},"born":{"type":"string","format":"date"},
    "pets":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"},"maxItems":2}},
    "required":["name","age"]}}})";

TEST(Mask, MatchesNaiveOnSentencePieceVocab) {
  const auto tok = load_tokenizer(testing_util::shared_dir() / "models/stories260K.gguf");
  check_masks_along_random_walks(tok, kPersonFormat, 6);
  check_masks_along_random_walks(tok, R"({"type":"json_object"})", 4);
}

TEST(Mask, MatchesNaiveOnGpt2Vocab) {
  const auto tok =
      load_tokenizer(testing_util::shared_dir() / "models/vocab/ggml-vocab-gpt-2.gguf");
  check_masks_along_random_walks(tok, kPersonFormat, 2);
  check_masks_along_random_walks(tok, R"({"type":"json_object"})", 2);
}

TEST(Mask, ControlTokensNeverAllowedAndIncrementalMatchesFresh) {
  const auto tok = load_tokenizer(testing_util::shared_dir() / "models/stories260K.gguf");
  const auto rf = ordered_json::parse(kPersonFormat);
  auto incremental = sample::compile_response_format(rf, tok);
  ASSERT_TRUE(incremental.ok());
  const std::string doc = R"({"name":"Tim","age":7,"pets":["cat"]})";
  // Longest-match tokens over the pieces (encode would add SentencePiece's leading space).
  std::vector<int32_t> ids;
  for (size_t pos = 0; pos < doc.size();) {
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      const std::string piece = tok.piece(id);
      const auto type = tok.token_type(id);  // stories260K spells '{' only as a byte token
      if ((type == tokenizer::TokenType::kNormal || type == tokenizer::TokenType::kByte) &&
          piece.size() > best_len && doc.compare(pos, piece.size(), piece) == 0) {
        best = id;
        best_len = piece.size();
      }
    }
    ASSERT_GE(best, 0) << doc.substr(pos);
    ids.push_back(best);
    pos += best_len;
  }
  for (size_t n = 0; n <= ids.size(); ++n) {
    const std::span<const int32_t> prefix(ids.data(), n);
    std::vector<float> a(tok.n_vocab(), 1.0f), b(tok.n_vocab(), 1.0f);
    (*incremental)->mask(a, prefix);
    auto fresh = sample::compile_response_format(rf, tok);
    (*fresh)->mask(b, prefix);
    EXPECT_EQ(a, b) << n;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      const auto type = tok.token_type(id);
      if (type == tokenizer::TokenType::kControl || type == tokenizer::TokenType::kUnknown) {
        EXPECT_TRUE(std::isinf(a[id]) || (n == ids.size() && tok.is_end_of_generation(id))) << id;
      }
    }
  }
  EXPECT_TRUE((*incremental)->complete(ids));
  std::vector<float> last(tok.n_vocab(), 1.0f);
  (*incremental)->mask(last, ids);
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    EXPECT_EQ(!std::isinf(last[id]), tok.is_end_of_generation(id)) << id;
}

}  // namespace
