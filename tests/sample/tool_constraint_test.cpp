// Tool-call constraints: random walks through the masks on Gemma 4's vocabulary (synth's, with
// the real special tokens) and on GPT-2's, in each syntax. Every finished walk must read back
// through chat::ReplyParser as calls to declared functions only, with nothing else in the reply,
// and every call's arguments must validate under its schema by python3-jsonschema (the
// independent validator). Along the way each allowed token must leave the reply completable and
// refused ones must not, checked on a fresh constraint.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "chat/reply.h"
#include "gguf/file.h"
#include "model/synth.h"
#include "sample/tool_constraint.h"
#include "testing/testing.h"
#include "vocabularies.h"

namespace {

using nlohmann::ordered_json;

using sample_tests::load_tokenizer;

// synth's Gemma 4 vocabulary (a tiny-e header; the weights are left unwritten).
tokenizer::Tokenizer gemma4_tokenizer() {
  const auto path = testing_util::temp_dir() / "tiny-e.gguf";
  auto w = model::synth_writer({.arch = "gemma4", .shape = "tiny-e", .no_weights = true});
  EXPECT_TRUE(w.ok());
  EXPECT_TRUE(w->write(path.string()).ok());
  return load_tokenizer(path);
}

std::vector<sample::ToolFunction> functions() {
  return {
      {"get_weather", ordered_json::parse(R"({"type": "object", "properties": {
         "city": {"type": "string", "minLength": 1, "maxLength": 8},
         "unit": {"enum": ["c", "f"]}}, "required": ["city"]})")},
      {"search", ordered_json::parse(R"({"type": "object", "properties": {
         "query": {"type": "string", "maxLength": 6},
         "filters": {"type": "object", "properties": {
           "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
           "exact": {"type": "boolean"}}, "required": ["exact"]},
         "limit": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["query", "limit"]})")},
      {"now", nullptr},
  };
}

bool allows_something_but_ending(const std::vector<float>& logits, const tokenizer::Tokenizer& tok,
                                 int32_t calls_end) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (!std::isinf(logits[id]) && !tok.is_end_of_generation(id) && id != calls_end) return true;
  }
  return false;
}

struct Walks {
  std::vector<std::string> replies;
  ordered_json checks = ordered_json::array();  // {"schema", "instance"} pairs for the validator
};

// Random walks: each step picks uniformly among the allowed tokens (ending, once allowed, half the
// time). Checks the mask at every step against a fresh constraint fed one token further.
void walk(const tokenizer::Tokenizer& tok, const sample::ToolCallSpec& spec, int n_walks,
          int max_steps, int n_probes, Walks& out) {
  const int32_t calls_end = sample::marker_token(tok, chat::calls_end_marker(spec.syntax));
  std::mt19937 rng(7);
  for (int w = 0; w < n_walks; ++w) {
    auto c = sample::compile_tool_calls(spec, tok);
    ASSERT_TRUE(c.ok()) << c.error().message();
    std::vector<int32_t> generated;
    bool ended = false;
    for (int step = 0; step < max_steps && !ended; ++step) {
      std::vector<float> logits(tok.n_vocab(), 0.0f);
      (*c)->mask(logits, generated);
      std::vector<int32_t> allowed, ends, refused;
      for (int32_t id = 0; id < tok.n_vocab(); ++id) {
        if (std::isinf(logits[id])) {
          refused.push_back(id);
        } else if (tok.is_end_of_generation(id) || id == calls_end) {
          ends.push_back(id);
        } else {
          allowed.push_back(id);
        }
      }
      ASSERT_FALSE(allowed.empty() && ends.empty())
          << "nothing allowed after " << tok.decode(generated);
      EXPECT_EQ(!ends.empty(), (*c)->complete(generated));
      // Spot checks against a fresh constraint one token further.
      std::shuffle(refused.begin(), refused.end(), rng);
      refused.resize(std::min<size_t>(refused.size(), n_probes));
      std::vector<int32_t> probes = refused;
      for (int i = 0; i < n_probes && !allowed.empty(); ++i)
        probes.push_back(allowed[rng() % allowed.size()]);
      for (int32_t probe : probes) {
        auto fresh = sample::compile_tool_calls(spec, tok);
        std::vector<int32_t> next = generated;
        next.push_back(probe);
        std::vector<float> after(tok.n_vocab(), 0.0f);
        (*fresh)->mask(after, next);
        const bool viable =
            (*fresh)->complete(next) || allows_something_but_ending(after, tok, calls_end);
        const bool was_allowed = !std::isinf(logits[probe]);
        if (!tok.is_end_of_generation(probe) && probe != calls_end) {
          EXPECT_EQ(viable, was_allowed) << "token " << probe << " '" << tok.piece(probe)
                                         << "' after '" << tok.decode(generated) << "'";
        }
      }
      if (!ends.empty() && (allowed.empty() || rng() % 2 == 0)) {
        ended = true;
        break;
      }
      generated.push_back(allowed[rng() % allowed.size()]);
    }
    if (!ended) continue;  // cut short: nothing to read back
    const std::string reply = tok.decode(generated);
    out.replies.push_back(reply);
    chat::ReplyParser parser(
        {.format = {.tools = spec.syntax, .reasoning = spec.reasoning}, .parse_tools = true});
    auto d = parser.push(reply);
    auto rest = parser.finish();
    EXPECT_EQ(d.content + rest.content, "") << "text outside the calls: " << reply;
    EXPECT_FALSE(parser.saw_malformed_call()) << reply;
    ASSERT_GE(parser.calls().size(), 1u) << reply;
    if (!spec.parallel) {
      EXPECT_EQ(parser.calls().size(), 1u) << reply;
    }
    for (const auto& call : parser.calls()) {
      const sample::ToolFunction* f = nullptr;
      for (const auto& candidate : spec.functions) {
        if (candidate.name == call.name) f = &candidate;
      }
      ASSERT_NE(f, nullptr) << "undeclared function " << call.name << " in " << reply;
      ordered_json schema =
          f->parameters.is_null()
              ? ordered_json::parse(R"({"type":"object","additionalProperties":false})")
              : f->parameters;
      if (!f->parameters.is_null() && !schema.contains("additionalProperties"))
        schema["additionalProperties"] = false;
      out.checks.push_back({{"schema", schema},
                            {"instance", ordered_json::parse(call.arguments)},
                            {"reply", reply}});
    }
  }
}

// Validates every collected instance with python3-jsonschema; the test fails on any error.
void validate_with_python(const Walks& walks) {
  ASSERT_FALSE(walks.checks.empty());
  const auto dir = testing_util::temp_dir();
  // Reasoning may hold any bytes; the validator reads the replies only to name a failure.
  std::ofstream(dir / "checks.json")
      << walks.checks.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  const std::string script =
      "import json,sys,jsonschema\n"
      "bad=0\n"
      "for c in json.load(open(sys.argv[1])):\n"
      "  errs=list(jsonschema.Draft202012Validator(c['schema']).iter_errors(c['instance']))\n"
      "  if errs:\n"
      "    bad+=1; print(c['reply'], errs[0].message)\n"
      "print(len(json.load(open(sys.argv[1]))), 'instances', bad, 'invalid')\n"
      "sys.exit(1 if bad else 0)\n";
  std::ofstream(dir / "validate.py") << script;
  std::string out;
  const int rc =
      testing_util::run_command(testing_util::python3() + " " + (dir / "validate.py").string() +
                                    " " + (dir / "checks.json").string(),
                                &out);
  EXPECT_EQ(rc, 0) << out;
}

TEST(ToolConstraint, Gemma4CallsAreDeclaredAndValid) {
  const auto tok = gemma4_tokenizer();
  Walks walks;
  walk(tok, {.syntax = chat::ToolSyntax::kGemma4, .functions = functions()}, 12, 160, 6, walks);
  EXPECT_GE(walks.replies.size(), 6u);
  validate_with_python(walks);
}

TEST(ToolConstraint, Gemma4NamedFunctionAfterOptionalReasoning) {
  const auto tok = gemma4_tokenizer();
  const auto all = functions();
  sample::ToolCallSpec spec{
      .syntax = chat::ToolSyntax::kGemma4,
      .functions = {all[1]},
      .parallel = false,
      .reasoning = {.open = "<|channel>", .close = "<channel|>", .named_channel = true}};
  Walks walks;
  walk(tok, spec, 10, 200, 4, walks);
  EXPECT_GE(walks.replies.size(), 5u);
  validate_with_python(walks);
}

TEST(ToolConstraint, HermesAndLlama3OnGpt2Vocab) {
  const auto tok =
      load_tokenizer(testing_util::shared_dir() / "models/vocab/ggml-vocab-gpt-2.gguf");
  Walks walks;
  walk(tok, {.syntax = chat::ToolSyntax::kHermes, .functions = functions()}, 3, 120, 1, walks);
  walk(tok, {.syntax = chat::ToolSyntax::kLlama3, .functions = functions()}, 2, 120, 1, walks);
  EXPECT_GE(walks.replies.size(), 3u);
  validate_with_python(walks);
}

TEST(ToolConstraint, MaskFactsOnGemma4) {
  const auto tok = gemma4_tokenizer();
  auto c = sample::compile_tool_calls(
      {.syntax = chat::ToolSyntax::kGemma4, .functions = functions()}, tok);
  ASSERT_TRUE(c.ok());
  auto allowed = [&](std::string_view text) {
    const auto ids = tok.encode(text, {.add_bos = false, .parse_special = true});
    std::vector<float> logits(tok.n_vocab(), 0.0f);
    (*c)->mask(logits, ids);
    std::vector<std::string> pieces;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (!std::isinf(logits[id])) pieces.push_back(tok.piece(id, true));
    }
    return pieces;
  };
  auto has = [](const std::vector<std::string>& v, std::string_view s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  // The reply opens a call at once: its marker, or its first byte spelled out.
  auto first = allowed("");
  EXPECT_TRUE(has(first, "<|tool_call>"));
  EXPECT_TRUE(has(first, "<"));
  EXPECT_FALSE(has(first, "<eos>"));
  EXPECT_FALSE(has(first, "a"));
  // city is required: no closing brace yet; a key starts (bare, or quoted with <|"|>).
  auto in_args = allowed("<|tool_call>call:get_weather{");
  EXPECT_FALSE(has(in_args, "}"));
  EXPECT_TRUE(has(in_args, "c"));
  EXPECT_TRUE(has(in_args, "<|\"|>"));
  EXPECT_FALSE(has(in_args, "u"));  // unit comes after city in the schema's order
  EXPECT_FALSE(has(in_args, " "));  // Gemma 4 writes no whitespace between tokens
  EXPECT_FALSE(has(in_args, "\n"));
  // A finished call may end the reply (end of turn or <|tool_response>) or be followed by another.
  auto after = allowed("<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>");
  EXPECT_TRUE(has(after, "<|tool_response>"));
  EXPECT_TRUE(has(after, "<turn|>"));
  EXPECT_TRUE(has(after, "<|tool_call>"));
  // A string at its maximum length can only close.
  auto full = allowed("<|tool_call>call:get_weather{city:<|\"|>abcdefgh");
  EXPECT_TRUE(has(full, "<|\"|>"));
  EXPECT_TRUE(has(full, "<"));
  EXPECT_FALSE(has(full, "a"));
}

TEST(ToolConstraint, RefusesWhatItCannotEnforce) {
  const auto tok = gemma4_tokenizer();
  auto bad = [&](const char* schema) {
    auto c = sample::compile_tool_calls(
        {.syntax = chat::ToolSyntax::kGemma4, .functions = {{"f", ordered_json::parse(schema)}}},
        tok);
    return c.ok() ? std::string("accepted") : c.error().message();
  };
  EXPECT_EQ(bad(R"({"type":"object","properties":{"x":{"not":{}}}})"),
            "function 'f': schema feature 'not' at /properties/x is not supported");
  EXPECT_EQ(bad(R"({"type":"string"})"),
            "function 'f': parameters must describe an object (\"type\": \"object\"), got type "
            "\"string\"");
  auto none = sample::compile_tool_calls(
      {.syntax = chat::ToolSyntax::kNone, .functions = functions()}, tok);
  EXPECT_FALSE(none.ok());
}

}  // namespace
