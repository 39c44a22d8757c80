// Structured output: response_format → grammar → per-step token masks.
//
// The vocabulary is indexed once: every token's bytes (control, user-defined and unused tokens
// never appear inside JSON), sorted so that tokens sharing a prefix are neighbours. A mask walks
// that list feeding bytes to the grammar, reusing the state of the shared prefix and skipping
// every token under a prefix the grammar refused. Inside an unconstrained string, tokens made of
// whole plain characters are decided by their length alone, and only the rest is walked.
#include "sample/constraint.h"

#include "sample/json_schema.h"
#include "sample/token_index.h"
#include "sample/walked_constraint.h"

namespace sample {
namespace {

class JsonConstraint final : public WalkedConstraint<GrammarState> {
 public:
  JsonConstraint(std::unique_ptr<Grammar> grammar, std::shared_ptr<const TokenIndex> index)
      : WalkedConstraint(std::move(index), GrammarState(grammar.get())),
        grammar_(std::move(grammar)) {}

 private:
  void compute_allowed() override {
    const int64_t budget = state_.plain_string_budget();
    const TokenWalk* walk = &index_->all;
    if (budget >= 0) {
      for (int32_t id = 0; id < index_->n_vocab; ++id) {
        const int32_t chars = index_->plain_chars[id];
        if (chars > 0 && chars <= budget) allowed_[id] = 1;
      }
      walk = &index_->not_plain;
    }
    levels_[0].assign(state_);
    walk_tokens(*index_, *walk, levels_, allowed_);
  }

  std::unique_ptr<Grammar> grammar_;  // the states point into it
};

util::Result<Grammar> grammar_for(const nlohmann::ordered_json& rf) {
  if (!rf.is_object()) return util::errorf("must be an object like {{\"type\":\"json_object\"}}");
  if (!rf.contains("type") || !rf["type"].is_string())
    return util::errorf("'type' must be \"text\", \"json_object\" or \"json_schema\"");
  const auto type = rf["type"].get<std::string>();
  if (type == "json_object") return any_json_object_grammar();
  if (type != "json_schema")
    return util::errorf(
        "type '{}' is not supported (use \"text\", \"json_object\" or \"json_schema\")", type);
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
    return util::errorf("json_schema must be an object with a 'schema'");
  const auto& js = rf["json_schema"];
  if (!js.contains("schema")) return util::errorf("json_schema.schema is missing");
  return compile_json_schema(js["schema"]);
}

}  // namespace

util::Result<std::unique_ptr<Constraint>> compile_response_format(
    const nlohmann::ordered_json& response_format, const tokenizer::Tokenizer& tokenizer) {
  if (response_format.is_object() && response_format.contains("type") &&
      response_format["type"] == "text") {
    return std::unique_ptr<Constraint>();
  }
  auto grammar = grammar_for(response_format);
  if (!grammar) return grammar.error().with_context("response_format");
  return std::unique_ptr<Constraint>(std::make_unique<JsonConstraint>(
      std::make_unique<Grammar>(std::move(*grammar)), shared_token_index(tokenizer)));
}

util::Result<std::unique_ptr<Constraint>> compile_response_format(
    const nlohmann::json& response_format, const tokenizer::Tokenizer& tokenizer) {
  nlohmann::ordered_json ordered;
  try {
    ordered = nlohmann::ordered_json::parse(response_format.dump());
  } catch (const nlohmann::json::exception&) {
    return util::errorf("response_format: a string in it is not valid UTF-8");
  }
  return compile_response_format(ordered, tokenizer);
}

}  // namespace sample
